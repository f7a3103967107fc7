"""One instance's faults, switched on in the fake server, seen by the supervisor in-process."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import psutil
import pytest
from helpers import free_port, until
from inprocess import config, events, supervising
from structlog.testing import capture_logs

from llamad.backends.health_watch import readiness_delay
from llamad.lifecycle.states import State


async def test_start_timeout_kills_a_server_still_loading(
    tmp_path: Path, tiny_model: Path, fake: None
) -> None:
    slow = {"model": tiny_model, "port": free_port(), "env": {"FAKE_LOAD_SECONDS": "60"}}
    async with supervising(config(tmp_path, {"a": slow}, fake=True, start_timeout=0.5)) as sup:
        inst = sup["a"]
        await until(lambda: inst.record.pid, what="spawned")
        pid = inst.record.pid
        await sup.state("a", State.BACKOFF)
        assert inst.record.error == "not ready within 0.5s; killed by SIGKILL"
        assert (inst.record.restarts, inst.record.failures) == (1, 1)
        assert pid is not None
        assert not psutil.pid_exists(pid)


async def test_bind_failure_is_a_failed_start_with_its_reason(
    tmp_path: Path, tiny_model: Path, fake: None
) -> None:
    port = free_port()
    cannot = {"model": tiny_model, "port": port, "env": {"FAKE_BIND_FAIL": "1"}}
    with socket.create_server(("127.0.0.1", free_port())) as held:
        taken = {"model": tiny_model, "port": held.getsockname()[1]}
        cfg = config(tmp_path, {"cannot": cannot, "taken": taken}, fake=True)
        async with supervising(cfg) as sup:
            # The server itself says it cannot bind: the port was free when llamad looked.
            inst = await sup.state("cannot", State.BACKOFF)
            assert inst.record.error == "port in use"
            # Taken before the launch: no process at all, and the holder is named.
            inst = await sup.state("taken", State.BACKOFF)
            assert inst.record.error is not None
            assert inst.record.error.startswith(f"port {held.getsockname()[1]} in use by pid ")
            assert inst.child is None


def most_polls(elapsed: float) -> int:
    """How many readiness polls fit in `elapsed` seconds if each took no time at all."""
    t, n = 0.0, 1
    while t < elapsed:
        t += readiness_delay(t)
        n += 1
    return n


async def test_slow_load_is_polled_densely_then_sparsely(
    tmp_path: Path, tiny_model: Path, fake: None
) -> None:
    slow = {"model": tiny_model, "port": free_port(), "env": {"FAKE_LOAD_SECONDS": "2"}}
    loop = asyncio.get_running_loop()
    async with supervising(config(tmp_path, {"a": slow}, fake=True)) as sup:
        began = loop.time()
        await sup.state("a", State.RUNNING)
        loading = [h for _, h in sup.probes if not h.ok]
        took = loop.time() - began
    # Refused until the process binds, then 503 "Loading model" until it has loaded.
    assert {h.status for h in loading} <= {None, 503}
    assert any(h.status == 503 for h in loading)
    # Never more often than the pacing allows: a fixed 20 ms would be twice as many.
    assert 2 <= len(loading) <= most_polls(took)
    assert most_polls(2.0) < 2.0 / 0.02 * 0.6


@pytest.mark.parametrize(
    ("fault", "reason", "signal"),
    [
        ("FAKE_EXIT_AFTER", "exited with code 1", None),
        ("FAKE_HANG_AFTER", "unhealthy: 2 failed probes", "SIGKILL"),
    ],
    ids=["crash", "hang"],
)
async def test_a_failure_after_a_healthy_run_restarts_at_once(
    tmp_path: Path, tiny_model: Path, fake: None, fault: str, reason: str, signal: str | None
) -> None:
    faulty = {"model": tiny_model, "port": free_port(), "env": {fault: "1"}}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, {"a": faulty}, fake=True)) as sup:
            inst = await sup.state("a", State.RUNNING)
            first = inst.record.pid
            await until(lambda: inst.record.pid not in (None, first), what="a new process")
            await sup.state("a", State.RUNNING)
    (exited, *_) = events(logs, "instance.exited", pid=first)
    assert exited["signal"] == signal  # a hung server is not trusted with SIGTERM
    (scheduled, *_) = events(logs, "instance.restart_scheduled", instance="a")
    assert scheduled["delay_s"] == 0.0
    assert scheduled["reason"].startswith(reason)
    changes = [(e["from"], e["to"]) for e in events(logs, "instance.state_changed")]
    assert changes[:4] == [
        ("stopped", "starting"),
        ("starting", "running"),
        ("running", "starting"),
        ("starting", "running"),
    ]
