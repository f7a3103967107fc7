"""An instance whose task has ended fails the events sent to it at once, never hangs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import free_port
from inprocess import config, events, supervising
from structlog.testing import capture_logs

from llamad.config.load import load
from llamad.lifecycle.states import Start, State
from llamad.supervise.inbox import InstanceClosed


async def test_a_send_queued_behind_the_last_stop_fails_and_so_does_a_later_one(
    tmp_path: Path, tiny_model: Path
) -> None:
    idle = {"model": tiny_model, "port": free_port(), "autostart": False}
    async with supervising(config(tmp_path, {"a": idle})) as sup:
        inst = sup["a"]
        inst.close()  # queues the Stop after which the task ends
        queued = asyncio.ensure_future(inst.send(Start()))
        with pytest.raises(InstanceClosed):
            await asyncio.wait_for(queued, 10)
        with pytest.raises(InstanceClosed):
            await asyncio.wait_for(inst.send(Start()), 10)
        # What the gateway sends by name to an instance that is gone is a no-op.
        await asyncio.wait_for(sup.supervisor.command("a", Start()), 10)


async def test_a_rollout_skips_an_instance_a_reload_removed_meanwhile(
    tmp_path: Path, tiny_model: Path
) -> None:
    a = {"model": tiny_model, "port": free_port()}
    b = {"model": tiny_model, "port": free_port()}
    async with supervising(config(tmp_path, {"a": a, "b": b})) as sup:
        first, second = await sup.state("a", State.RUNNING), await sup.state("b", State.RUNNING)
        with capture_logs() as logs:
            rolling = asyncio.ensure_future(sup.supervisor.rollout.run([first, second]))
            # The rollout is on `a`: a reload now removes `b`, which the rollout reaches next.
            assert await first.wait_until(State.STOPPING, State.STARTING, timeout=10)
            await sup.supervisor.apply(load(config(tmp_path, {"a": a})).instances)
            assert await asyncio.wait_for(rolling, 30) == ["a"]
        assert events(logs, "binary.rollout_skipped", instance="b")
        assert not events(logs, "binary.rollout_halted")
        assert "b" not in sup.supervisor.rollout.failed
