"""The supervisor in this process: apply(), the stop deadline and RPC heads waiting."""

from __future__ import annotations

from pathlib import Path

import psutil
from helpers import free_port, health, until
from inprocess import config, events, supervising
from structlog.testing import capture_logs

from llamad.config.load import load
from llamad.lifecycle.states import Start, State


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
        await sup.drained()
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
