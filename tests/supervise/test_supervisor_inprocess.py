"""The supervisor and its instances in this process: no daemon, no control API.

The Runtime is the real one; its children are the real llama-server where it can show the
behaviour, and tests/fake_llama_server.py where a fault must be switched on (slow load,
SIGTERM ignored, exit after, bind failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import FAKE_SERVER, free_port, health, until, write_config
from structlog.testing import capture_logs

from llamad.backends.probes import Health, Prober, make_transport, readiness_delay
from llamad.config.load import Resolved, load
from llamad.lifecycle.states import Start, State
from llamad.supervise.instance import Instance
from llamad.supervise.runtime import Runtime
from llamad.supervise.supervisor import Supervisor

FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.5,
    "unhealthy_after": 2,
    "start_timeout": 20.0,
    "stop_timeout": 5.0,
    "backoff_initial": 30.0,  # a failed start stays in BACKOFF while the test looks
    "backoff_max": 30.0,
}


@dataclass
class Sup:
    """A running Supervisor, its config and every probe result it saw."""

    supervisor: Supervisor
    resolved: Resolved
    probes: list[tuple[str, Health]] = field(default_factory=list)

    def __getitem__(self, name: str) -> Instance:
        return self.supervisor.instances[name]

    async def state(self, name: str, *states: State, timeout: float = 20.0) -> Instance:
        inst = self[name]
        assert await inst.wait_until(*states, timeout=timeout), (inst.record, states)
        return inst


def config(
    tmp: Path, instances: dict[str, dict[str, Any]], fake: bool = False, **knobs: Any
) -> Path:
    daemon: dict[str, Any] = {"state_dir": str(tmp / "state")}
    if fake:
        daemon["llama_server"] = str(FAKE_SERVER)
    path = tmp / f"llamad-{len(list(tmp.glob('llamad-*.toml')))}.toml"
    return write_config(path, instances, daemon=daemon, supervise={**FAST, **knobs})


@contextlib.asynccontextmanager
async def supervising(cfg: Path) -> AsyncIterator[Sup]:
    """A Supervisor over `cfg`'s instances, shut down (gracefully) on the way out."""
    resolved = load(cfg)
    transport = make_transport()
    runtime = Runtime(
        tools=resolved.tools, prober=Prober(transport), log_dir=resolved.daemon.log_dir
    )
    sup = Sup(Supervisor(runtime, observe_probe=lambda n, h: sup.probes.append((n, h))), resolved)
    task = asyncio.create_task(sup.supervisor.run())
    try:
        await sup.supervisor.apply(resolved.instances)
        yield sup
    finally:
        await sup.supervisor.shutdown()
        await task
        await transport.aclose()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, llama_server: Path) -> None:
    """The fake server answers --help as the real one, for the option catalogue."""
    monkeypatch.setenv("FAKE_REAL_SERVER", str(llama_server))


def events(logs: list[dict[str, Any]], name: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name and all(e.get(k) == v for k, v in match.items())]


async def test_apply_adds_changes_removes_and_hands_a_port_over(
    tmp_path: Path, tiny_model: Path
) -> None:
    p1, p2, p3 = free_port(), free_port(), free_port()
    first = {
        "a": {"model": tiny_model, "port": p1},
        "b": {"model": tiny_model, "port": p2},
        "keep": {"model": tiny_model, "port": p3},
    }
    async with supervising(config(tmp_path, first)) as sup:
        for name in first:
            await sup.state(name, State.RUNNING)
        a_pid, b_pid, keep_pid = (sup[n].record.pid for n in ("a", "b", "keep"))
        # a goes, c takes a's port, b changes (ctx), keep is left alone.
        second = {
            "b": {"model": tiny_model, "port": p2, "ctx_size": 256},
            "c": {"model": tiny_model, "port": p1},
            "keep": {"model": tiny_model, "port": p3},
        }
        changes = await sup.supervisor.apply(load(config(tmp_path, second)).instances)
        assert changes.to_dict() == {
            "added": ["c"],
            "changed": ["b"],
            "removed": ["a"],
            "unchanged": ["keep"],
        }
        assert "a" not in sup.supervisor.instances
        assert a_pid is not None
        assert not psutil.pid_exists(a_pid)
        c = await sup.state("c", State.RUNNING)
        b = await sup.state("b", State.RUNNING)
        assert b.record.pid != b_pid
        assert (c.record.restarts, b.record.restarts) == (0, 0)  # the port was free for c
        assert sup["keep"].record.pid == keep_pid
        assert health(p1) == 200


async def test_shutdown_kills_a_child_that_ignores_sigterm_after_stop_timeout(
    tmp_path: Path, tiny_model: Path, fake: None
) -> None:
    wedged = {"model": tiny_model, "port": free_port(), "env": {"FAKE_IGNORE_SIGTERM": "1"}}
    cfg = config(tmp_path, {"a": wedged}, fake=True, stop_timeout=0.5)
    with capture_logs() as logs:
        async with supervising(cfg) as sup:
            pid = (await sup.state("a", State.RUNNING)).record.pid
    (exited,) = events(logs, "instance.exited", instance="a")
    assert (exited["pid"], exited["signal"]) == (pid, "SIGKILL")
    assert [e["to"] for e in events(logs, "instance.state_changed")][-2:] == [
        "stopping",
        "stopped",
    ]


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


async def test_crash_after_healthy_restarts_at_once(
    tmp_path: Path, tiny_model: Path, fake: None
) -> None:
    crashy = {"model": tiny_model, "port": free_port(), "env": {"FAKE_EXIT_AFTER": "1"}}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, {"a": crashy}, fake=True)) as sup:
            inst = await sup.state("a", State.RUNNING)
            first = inst.record.pid
            await until(lambda: inst.record.pid not in (None, first), what="a new process")
            await sup.state("a", State.RUNNING)
    (scheduled, *_) = events(logs, "instance.restart_scheduled", instance="a")
    assert scheduled["delay_s"] == 0.0
    assert scheduled["reason"].startswith("exited with code 1")
    changes = [(e["from"], e["to"]) for e in events(logs, "instance.state_changed")]
    assert changes[:4] == [
        ("stopped", "starting"),
        ("starting", "running"),
        ("running", "starting"),
        ("starting", "running"),
    ]


async def test_head_waits_for_its_worker_and_the_start_deadline_ends_the_wait(
    tmp_path: Path, tiny_model: Path
) -> None:
    head = {"model": tiny_model, "port": free_port(), "rpc": ["w1"], "ctx_size": 256}
    worker = {"kind": "rpc-worker", "port": free_port(), "autostart": False}
    cfg = config(tmp_path, {"w1": worker, "head": head}, start_timeout=1.0)
    async with supervising(cfg) as sup:
        inst = sup["head"]
        await until(lambda: inst.record.waiting_for == ("w1",), what="head waiting")
        assert (inst.record.state, inst.child) == (State.STARTING, None)
        await sup.state("head", State.BACKOFF)
        assert inst.record.error == "rpc workers not ready within 1s: w1"
        assert inst.record.waiting_for == ()
        # A reload gives it time to load (knobs apply in place), then a person starts
        # both: the head waits again, and launches once w1 runs.
        relaxed = load(config(tmp_path, {"w1": worker, "head": head}, start_timeout=20.0))
        changes = await sup.supervisor.apply(relaxed.instances)
        assert changes.unchanged == ["w1", "head"]
        await sup["w1"].send(Start())
        await inst.send(Start())
        await sup.state("w1", State.RUNNING)
        await sup.state("head", State.RUNNING)
        assert inst.record.error is None
