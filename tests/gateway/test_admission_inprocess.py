"""The gateway's admission under forced interleavings, in process, over a supervisor double.

Each test puts two tasks in the one order that used to break a rule (a stop sent while a
request ran, a count gone negative, a keep_alive that outlived its load, a load a reload
answered 503) and checks the rule holds. No processes, no sleeps: the double moves states
only when the test (or a command, with `auto`) says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

import pytest
from supervisor_double import Double, gateway, spec, until

from llamad.gateway.admission import crashes as crashes_module
from llamad.gateway.admission import drain as drain_module
from llamad.gateway.contract.port import GatewayError, LoadFailed, Upstream
from llamad.gateway.core import Gateway
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)


async def hold(gw: Gateway, double: Double, name: str, release: asyncio.Future[None]) -> Upstream:
    """One request to `name`, inside its lease until `release` is resolved."""
    async with gw.lease(name) as upstream:
        double.inside[name] = double.inside.get(name, 0) + 1
        try:
            await release
        finally:
            double.inside[name] -= 1
    return upstream


def spawn(coro: Awaitable[Upstream]) -> asyncio.Task[Upstream]:
    return asyncio.ensure_future(coro)


async def test_an_idle_stop_never_lands_on_a_request_admitted_in_the_same_step() -> None:
    double = Double()
    double.add(spec("a", idle_timeout=1.0), State.RUNNING)
    gw = gateway(double)
    gw.idle.tick(time.monotonic())  # arms the timer
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    request = spawn(hold(gw, double, "a", done))  # a request is on its way...
    gw.idle.tick(time.monotonic() + 60)  # ...when the timer expires in the same step
    await until(lambda: double.inside.get("a") == 1, "the request runs")
    done.set_result(None)
    await request
    assert double.stops() == [("a", "Stop(idle=True)", 0)], "stopped under a running request"
    await gw.close()


async def test_an_eviction_never_lands_on_a_request_admitted_between_plan_and_stop() -> None:
    double = Double()
    double.add(spec("a"), State.RUNNING)
    double.add(spec("b"))
    gw = gateway(double, max_loaded=1)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for_a: list[asyncio.Task[Upstream]] = []
    # The moment b's load plans its room, a request for a (the victim) arrives.
    double.on_names = lambda: for_a.append(spawn(hold(gw, double, "a", done)))
    for_b = spawn(hold(gw, double, "b", done))
    await until(lambda: bool(double.stops()), "a is evicted")
    assert double.stops() == [("a", "Stop(idle=True)", 0)], "evicted under a running request"
    await until(lambda: double.inside.get("b") == 1, "b is served")
    for task in (for_b, *for_a):
        task.cancel()
    await asyncio.gather(for_b, *for_a, return_exceptions=True)
    await gw.close()


async def test_an_unload_while_busy_happens_once_and_later_requests_keep_the_model() -> None:
    double = Double()
    double.add(spec("a", idle_timeout=600.0), State.RUNNING)
    gw = gateway(double)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    busy = spawn(hold(gw, double, "a", done))
    await until(lambda: double.inside.get("a") == 1, "the request runs")
    await gw.unload("a")
    assert double.stops() == [], "unloaded under a running request"
    done.set_result(None)
    await busy
    await until(lambda: double.insts["a"].state is State.IDLE, "unloaded once idle")
    async with gw.lease("a"):  # an OpenAI client that never asked for an unload
        pass
    assert double.insts["a"].state is State.RUNNING
    await until(lambda: gw.sched.slot("a").expires is not None, "the idle timer armed")
    left = gw.sched.slot("a").expires - time.monotonic()  # type: ignore[operator]
    assert left > 500, "the unload outlived the request that asked for it"
    assert len(double.stops()) == 1
    await gw.close()


async def test_keep_alive_holds_for_one_load_only() -> None:
    double = Double()
    double.add(spec("a", idle_timeout=600.0))
    gw = gateway(double)
    async with gw.lease("a", keep_alive=-1):
        pass
    assert gw.sched.timeout("a") is None, "keep_alive -1: loaded for ever"
    await gw.unload("a")
    async with gw.lease("a"):
        pass
    assert gw.sched.timeout("a") == 600.0, "a new process goes back to idle_timeout"
    await gw.close()


async def test_a_request_that_outlives_a_drain_never_counts_below_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drain_module, "DRAIN_MAX_S", 0.05)
    double = Double()
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stuck = spawn(hold(gw, double, "a", done))
    await until(lambda: double.inside.get("a") == 1, "the request runs")
    async with gw.draining(["a"], []):  # a reload removes it; the drain gives up waiting
        double.remove("a")
    double.add(spec("a", on_demand=False), State.RUNNING)  # and the name comes back
    done.set_result(None)
    await stuck
    assert gw.sched.counts().get("a", (0, 0)) == (0, 0)
    async with gw.lease("a"):
        assert gw.sched.counts()["a"] == (1, 0)
    await until(lambda: gw.sched.counts()["a"] == (0, 0), "nothing in flight")
    await gw.close()


async def test_a_removed_model_brought_back_while_it_drains_holds_its_new_requests() -> None:
    """Removed with a request in flight: 404 to new ones. Brought back by a later reload
    before the drain ends: new requests wait on the same slot, and the new process takes
    them once the drain is over (none reaches the old one, none is told 404)."""
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    loop = asyncio.get_running_loop()
    first_done, late_done, leave = (loop.create_future() for _ in range(3))
    first = spawn(hold(gw, double, "a", first_done))
    await until(lambda: double.inside.get("a") == 1, "the request runs")
    double.insts["a"].retiring = True  # the supervisor's mark, in the reload's step
    entered = asyncio.Event()

    async def handover() -> None:
        async with gw.draining(["a"], []):
            entered.set()
            await leave

    drain = asyncio.ensure_future(handover())
    with pytest.raises(GatewayError) as refused:
        async with gw.lease("a"):
            pass
    assert refused.value.status == 404
    double.insts["a"].retiring = False  # a later reload wants it back
    late = spawn(hold(gw, double, "a", late_done))
    await until(lambda: gw.sched.counts()["a"] == (1, 1), "held behind the drain")
    first_done.set_result(None)
    old = await first
    await until(entered.is_set, "the drain entered once the request ended")
    double.move("a", State.STOPPED)
    double.move("a", State.RUNNING)  # restarted in place with its new spec
    leave.set_result(None)
    await drain
    await until(lambda: double.inside.get("a") == 1, "the late request is served")
    late_done.set_result(None)
    assert (await late).pid not in (None, old.pid)
    assert gw.sched.counts()["a"] == (0, 0)
    await gw.close()


async def test_a_reload_during_an_on_demand_load_loads_it_again() -> None:
    double = Double(auto=False)
    double.add(spec("a"))
    gw = gateway(double)
    waiter = spawn(hold(gw, double, "a", asyncio.get_running_loop().create_future()))
    await until(lambda: double.insts["a"].state is State.STARTING, "the load starts it")
    async with gw.draining([], ["a"]):  # the reload restarts it with its new spec
        double.move("a", State.STOPPING)
        double.move("a", State.STOPPED)
        await until(lambda: gw.sched.slot("a").load is None, "the load saw it stop")
        double.move("a", State.STARTING)
    double.move("a", State.RUNNING)
    await until(lambda: double.inside.get("a") == 1, "the waiter is served")
    assert not waiter.done()
    assert double.stops() == [], "the interrupted load stopped what the reload restarted"
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await gw.close()


async def test_a_request_whose_process_died_before_answering_goes_to_its_successor() -> None:
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    async with gw.lease("a") as first:
        double.crash("a")
        again = spawn(gw.restarted(first))  # type: ignore[arg-type]
        await until(lambda: double.insts["a"].state is State.STARTING, "restarting")
        double.move("a", State.RUNNING)
        second = await again
    assert second is not None
    assert second.pid not in (None, first.pid)
    await gw.close()


async def test_a_process_whose_exit_is_seen_late_still_hands_its_request_on() -> None:
    """On a busy machine the supervisor sees an exit late: the request waits for it, and
    is not taken for the server's own failure after a guessed second."""
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    async with gw.lease("a") as first:
        double.kill("a")  # dead, and still RUNNING to the supervisor
        again = spawn(gw.restarted(first))  # type: ignore[arg-type]
        with pytest.raises(TimeoutError):  # well past the 1 s a fixed window gave it
            async with asyncio.timeout(1.5):
                await asyncio.shield(again)
        double.crash("a")  # the exit is seen at last, and the supervisor restarts it
        double.move("a", State.RUNNING)
        second = await again
    assert second is not None
    assert second.pid not in (None, first.pid)
    await gw.close()


async def test_a_process_never_seen_gone_is_given_up_on_after_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(crashes_module, "EXIT_SEEN_S", 0.2)
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    async with gw.lease("a") as first:
        double.kill("a")  # and the supervisor never sees it go
        assert await gw.restarted(first) is None
    await gw.close()


async def test_a_failure_while_the_process_still_runs_is_not_sent_again() -> None:
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    async with gw.lease("a") as first:
        assert await gw.restarted(first) is None
    await gw.close()


async def test_a_model_that_fails_to_load_is_not_respawned_by_every_request() -> None:
    double = Double()
    double.add(spec("a"), State.RUNNING)
    double.add(spec("broken"))
    double.broken.add("broken")
    gw = gateway(double, max_loaded=1)
    refusals = []
    for _ in range(10):
        with pytest.raises(LoadFailed) as refused:
            async with gw.lease("broken"):
                pass
        refusals.append(refused.value)
    starts = [c for c in double.commands if c[:2] == ("broken", "Start")]
    assert len(starts) == 1, "each request respawned it"
    assert len(double.stops()) <= 2, "each request evicted a healthy model"  # a, then broken
    assert all(r.retry_after and r.retry_after > 0 for r in refusals)
    async with gw.draining([], ["broken"]):  # its spec changed: try again at once
        double.broken.discard("broken")
    async with gw.lease("broken"):
        assert double.insts["broken"].state is State.RUNNING
    await gw.close()
