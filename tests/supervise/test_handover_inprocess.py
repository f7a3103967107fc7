"""Reloads while a drain runs, in this process: the gateway's drain is a gate the test
holds open (a request in flight) and releases with a future, so each interleaving is
forced, not hoped for. The instances are the real llama-server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import free_port, listening_on, until
from inprocess import Sup, config, events, supervising
from structlog.testing import capture_logs

from llamad.config.load import load
from llamad.lifecycle.states import State
from llamad.supervise.handover import Handover, Handovers

pytestmark = pytest.mark.timeout(120)


class Gate:
    """The gateway's drain, as the supervisor sees it: a drain of a name the test holds
    waits (as for a stream in flight) until the test lets it go."""

    def __init__(self) -> None:
        self.held: dict[str, asyncio.Future[None]] = {}
        self.entered: list[tuple[list[str], list[str]]] = []

    def hold(self, name: str) -> None:
        self.held[name] = asyncio.get_running_loop().create_future()

    def let_go(self, name: str) -> None:
        self.held.pop(name).set_result(None)

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def drain() -> AsyncIterator[None]:
            self.entered.append((removed, changed))
            for name in (*removed, *changed):
                if (held := self.held.get(name)) is not None:
                    await held
            yield

        return drain()


async def reload(sup: Sup, tmp: Path, instances: dict[str, dict[str, Any]]) -> list[str]:
    """Apply a new config; returns what is left draining. Never waits for a drain."""
    await asyncio.wait_for(sup.supervisor.apply(load(config(tmp, instances)).instances), 10)
    return sup.supervisor.draining()


def retiring(sup: Sup, name: str) -> bool:
    """The gateway's view: `name` is unknown to new requests while it drains."""
    facts = sup.supervisor.facts(name)
    assert facts is not None
    return facts.retiring


def ctx(sup: Sup, name: str) -> str | None:
    """The context size instance `name` runs with."""
    return dict(sup[name].spec.settings).get("LLAMA_ARG_CTX_SIZE")


@asynccontextmanager
async def watching(port: int) -> AsyncIterator[list[int]]:
    """Count the processes on `port` all along; the list holds the highest seen."""
    peak, done = [0], asyncio.Event()

    async def look() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], len(await asyncio.to_thread(listening_on, port)))
            # A look every 50 ms: a second process lives for seconds (its load, or its
            # failed bind's backoff), and a tighter loop would take a core.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.05)

    task = asyncio.create_task(look())
    try:
        yield peak
    finally:
        done.set()
        await task


async def test_a_model_added_while_another_drains_starts_at_once(
    tmp_path: Path, tiny_model: Path
) -> None:
    gate, pa, pb = Gate(), free_port(), free_port()
    a = {"model": tiny_model, "port": pa, "ctx_size": 256}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, {"a": a}), gate.draining) as sup:
            old = (await sup.state("a", State.RUNNING)).record.pid
            gate.hold("a")  # a stream runs on a
            changed = {"a": {**a, "ctx_size": 512}}
            assert await reload(sup, tmp_path, changed) == ["a"]
            b = {"model": tiny_model, "port": pb}
            assert await reload(sup, tmp_path, {**changed, "b": b}) == ["a"]
            await sup.state("b", State.RUNNING)
            assert (sup["a"].record.state, sup["a"].record.pid) == (State.RUNNING, old)
            assert sup["a"].spec.launch != sup.supervisor.wanted["a"].launch
            gate.let_go("a")  # the stream ends
            await sup.drained()
            inst = await sup.state("a", State.RUNNING)
            assert inst.record.pid != old
            assert inst.spec == sup.supervisor.wanted["a"]
    (drained,) = events(logs, "config.drained", instance="a")
    assert drained["outcome"] == "restarted"


@pytest.mark.parametrize("ctx", [256, 512], ids=["same spec", "another spec"])
async def test_a_removed_model_brought_back_waits_for_its_drain(
    tmp_path: Path, tiny_model: Path, ctx: int
) -> None:
    gate, port = Gate(), free_port()
    a = {"model": tiny_model, "port": port, "ctx_size": 256}
    async with supervising(config(tmp_path, {"a": a}), gate.draining) as sup:
        first = await sup.state("a", State.RUNNING)
        async with watching(port) as peak:
            gate.hold("a")
            assert await reload(sup, tmp_path, {}) == ["a"]
            assert retiring(sup, "a"), "unknown to new requests"
            assert await reload(sup, tmp_path, {"a": {**a, "ctx_size": ctx}}) == ["a"]
            assert not retiring(sup, "a"), "held, no longer 404"
            assert sup["a"] is first
            assert first.record.state is State.RUNNING
            gate.let_go("a")
            await sup.drained()
            inst = await sup.state("a", State.RUNNING)
        assert peak[0] <= 1, "two processes on one port"
        assert inst is first, "one instance all along: its requests were never dropped"
        assert inst.spec.launch == sup.supervisor.wanted["a"].launch
        assert gate.entered[1:] == [(["a"], [])], "past its first start: one drain, a removal"


async def _another_change(sup: Sup, tmp: Path, a: dict[str, Any]) -> None:
    await reload(sup, tmp, {"a": {**a, "ctx_size": 512}})


async def _a_restart(sup: Sup, tmp: Path, a: dict[str, Any]) -> None:
    # As a replaced model file or a new build asks: left to the handover ahead.
    await asyncio.wait_for(sup.supervisor.restart(sup["a"]), 5)


@pytest.mark.parametrize("then", [_another_change, _a_restart], ids=["change", "restart"])
async def test_what_comes_while_a_change_drains_costs_no_second_restart(
    tmp_path: Path, tiny_model: Path, then: Callable[[Sup, Path, dict[str, Any]], Awaitable[None]]
) -> None:
    """A second change (the final spec wins) or a restart asked for while a change
    drains: the handover ahead carries it out with its one restart."""
    gate, port = Gate(), free_port()
    a = {"model": tiny_model, "port": port, "ctx_size": 256}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, {"a": a}), gate.draining) as sup:
            await sup.state("a", State.RUNNING)
            async with watching(port) as peak:
                gate.hold("a")
                await reload(sup, tmp_path, {"a": {**a, "ctx_size": 384}})
                await then(sup, tmp_path, a)
                gate.let_go("a")
                await sup.drained()
                inst = await sup.state("a", State.RUNNING)
            assert peak[0] <= 1, "two processes on one port"
            assert inst.spec == sup.supervisor.wanted["a"]
    starts = events(logs, "instance.state_changed", instance="a", to="starting")
    assert len(starts) == 2, "the first start, then one restart"


async def test_a_change_after_the_first_took_its_wish_restarts_again(
    tmp_path: Path, tiny_model: Path
) -> None:
    """The second wish comes once the first handover has read its own: it is queued
    behind, and applied after it (two restarts, one after the other)."""
    gate, port = Gate(), free_port()
    a = {"model": tiny_model, "port": port, "ctx_size": 256}
    async with supervising(config(tmp_path, {"a": a}), gate.draining) as sup:
        await sup.state("a", State.RUNNING)
        async with watching(port) as peak:
            await reload(sup, tmp_path, {"a": {**a, "ctx_size": 384}})
            await until(lambda: ctx(sup, "a") == "384", what="first taken")
            gate.hold("a")  # a request reaches the restarted a before the second reload
            assert await reload(sup, tmp_path, {"a": {**a, "ctx_size": 512}}) == ["a"]
            await sup.state("a", State.RUNNING)
            gate.let_go("a")
            await sup.drained()
            await sup.state("a", State.RUNNING)
        assert peak[0] <= 1
        assert ctx(sup, "a") == "512"
        assert len(gate.entered) == 3, "the first start, then one drain per change"


async def test_a_port_a_draining_model_frees_is_handed_over_across_reloads(
    tmp_path: Path, tiny_model: Path
) -> None:
    gate, port = Gate(), free_port()
    async with supervising(
        config(tmp_path, {"a": {"model": tiny_model, "port": port}}), gate.draining
    ) as sup:
        old = (await sup.state("a", State.RUNNING)).record.pid
        gate.hold("a")
        await reload(sup, tmp_path, {})
        b = {"model": tiny_model, "port": port, "ctx_size": 512}
        assert await reload(sup, tmp_path, {"b": b}) == ["a", "b"]
        assert "b" not in sup.supervisor.instances, "b waits for a's stop"
        assert sup["a"].record.pid == old
        gate.let_go("a")
        await sup.drained()
        inst = await sup.state("b", State.RUNNING)
        assert "a" not in sup.supervisor.instances
        assert old is not None
        assert not psutil.pid_exists(old)
        assert inst.record.restarts == 0, "the port was free at b's first start"


async def test_a_swap_and_a_later_change_of_one_side_never_deadlock(
    tmp_path: Path, tiny_model: Path
) -> None:
    gate, p1, p2 = Gate(), free_port(), free_port()
    a, b = {"model": tiny_model, "port": p1}, {"model": tiny_model, "port": p2}
    async with supervising(config(tmp_path, {"a": a, "b": b}), gate.draining) as sup:
        await sup.state("a", State.RUNNING)
        await sup.state("b", State.RUNNING)
        gate.hold("a")
        gate.hold("b")
        swapped = {"a": {**a, "port": p2}, "b": {**b, "port": p1}}
        await reload(sup, tmp_path, swapped)
        await reload(sup, tmp_path, {**swapped, "a": {**swapped["a"], "ctx_size": 512}})
        gate.let_go("b")
        gate.let_go("a")
        await sup.drained()
        ia, ib = await sup.state("a", State.RUNNING), await sup.state("b", State.RUNNING)
        assert (ia.spec.port, ib.spec.port) == (p2, p1)
        assert ctx(sup, "a") == "512"
        assert (ia.record.restarts, ib.record.restarts) == (0, 0)


async def test_shutdown_while_a_drain_runs_leaves_no_child(
    tmp_path: Path, tiny_model: Path
) -> None:
    gate = Gate()
    a = {"model": tiny_model, "port": free_port()}
    loop = asyncio.get_running_loop()
    async with supervising(config(tmp_path, {"a": a}, stop_timeout=2.0), gate.draining) as sup:
        pid = (await sup.state("a", State.RUNNING)).record.pid
        gate.hold("a")  # never let go: a stream that outlives the daemon
        await reload(sup, tmp_path, {"a": {**a, "ctx_size": 512}})
        t0 = loop.time()
    assert loop.time() - t0 < 2.0 + 5
    assert pid is not None
    assert not psutil.pid_exists(pid)
    assert not sup.supervisor.draining()


async def test_a_start_waits_for_the_stop_of_a_handover_queued_behind_a_start() -> None:
    """b's first handover took its wish (it starts b on the port); a second, queued
    behind it, will stop b again: a start on that port waits for that stop too."""
    loop = asyncio.get_running_loop()
    starting, second = loop.create_future(), loop.create_future()

    async def first(h: Handover) -> None:
        h.stopped.set()
        h.take()
        await starting

    async def then(h: Handover) -> None:
        await second
        h.stopped.set()

    handovers = Handovers()
    async with asyncio.TaskGroup() as group:
        handovers.begin(group, "b", first)
        await until(lambda: not handovers.ahead("b"), what="the first took its wish")
        handovers.begin(group, "b", then)
        assert len(handovers.stopping(["b"])) == 1, "the queued one's stop"
        starting.set_result(None)
        second.set_result(None)
        await handovers.settled("b")
    assert not handovers.pending("b")
