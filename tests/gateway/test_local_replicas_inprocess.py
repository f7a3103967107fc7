"""Local instances sharing an alias, balanced in process without a fleet: the supervisor
double stands in for both instances, each request holds its lease until the test
releases it, and no processes or sleeps are involved."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from supervisor_double import Asked, Double, gateway, spec, until

from llamad.gateway.access.scope import may_use
from llamad.gateway.contract.caller import ANYONE, Caller
from llamad.gateway.contract.port import Upstream
from llamad.gateway.core import Gateway
from llamad.gateway.fleet.peer_models import RemoteModel, models_of
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)

ONE_SLOT = (("LLAMA_ARG_N_PARALLEL", "1"),)


def setup(
    on_demand: bool = False, idle_timeout: float = 600.0, **settings: object
) -> tuple[Double, Gateway]:
    """g0 and g1, one slot each, both answering to alias `q`; no fleet."""
    double = Double()
    for name in ("g0", "g1"):
        one = spec(name, on_demand=on_demand, idle_timeout=idle_timeout)
        s = dataclasses.replace(one, settings=ONE_SLOT, aliases=("q",))
        double.add(s, State.IDLE if on_demand else State.RUNNING)
    return double, gateway(double, **settings)


async def hold(
    gw: Gateway, release: asyncio.Future[None], body: object = None, keep: float | None = None
) -> Upstream:
    async with gw.lease("q", keep_alive=keep, asking=Asked(body)) as upstream:
        await release
    return upstream


def busy(gw: Gateway) -> dict[str, int]:
    return {n: gw.sched.slot(n).in_flight for n in ("g0", "g1")}


async def test_requests_take_both_replicas_then_wait_at_the_gateway() -> None:
    _double, gw = setup()
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(3)]
    tasks = [asyncio.ensure_future(hold(gw, g)) for g in gates]
    await until(lambda: gw.balancer.waiting["q"] == 1, "the third waits at the gateway")
    assert busy(gw) == {"g0": 1, "g1": 1}, "one on each, never two on one"
    first = await asyncio.wait_for(asyncio.shield(tasks[0]), 0) if tasks[0].done() else None
    assert first is None
    gates[1].set_result(None)  # g1's slot frees: the waiter takes it
    second = await tasks[1]
    await until(lambda: gw.balancer.waiting["q"] == 0, "the waiter admitted")
    assert busy(gw) == {"g0": 1, "g1": 1}
    for gate in (gates[0], gates[2]):
        gate.set_result(None)
    names = {(await tasks[0]).name, second.name, (await tasks[2]).name}
    assert names == {"g0", "g1"}
    assert busy(gw) == {"g0": 0, "g1": 0}
    await gw.close()


async def test_two_requests_in_one_step_never_take_the_same_slot() -> None:
    _double, gw = setup()
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    tasks = [asyncio.ensure_future(hold(gw, gate)) for _ in range(2)]  # started together
    await until(lambda: sum(busy(gw).values()) == 2, "both in")
    assert busy(gw) == {"g0": 1, "g1": 1}
    gate.set_result(None)
    assert sorted(u.name for u in await asyncio.gather(*tasks)) == ["g0", "g1"]
    await gw.close()


async def test_a_conversation_stays_on_its_replica() -> None:
    _double, gw = setup()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    turn = {"messages": [{"role": "user", "content": "hi"}]}
    later = {"messages": [*turn["messages"], {"role": "assistant", "content": "yo"},
                          {"role": "user", "content": "more"}]}  # fmt: skip
    first = (await hold(gw, done, turn)).name
    other = {"messages": [{"role": "user", "content": "another chat"}]}
    assert (await hold(gw, done, other)).name != first  # a new chat: the one chosen least lately
    assert (await hold(gw, done, later)).name == first
    await gw.close()


async def test_a_replica_that_fails_before_answering_hands_over_to_the_other() -> None:
    double, gw = setup()
    async with gw.lease("q") as upstream:
        dead = upstream.name
        double.crash(dead)  # the supervisor restarts it: STARTING
        again = await gw.restarted(upstream)
        assert again is not None
        assert again.name != dead
        assert await gw.restarted(again) is None  # once: a second failure is the answer
    async with gw.lease("q") as upstream:  # skipped while it restarts
        assert upstream.name != dead
    double.move(dead, State.RUNNING)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    tasks = [asyncio.ensure_future(hold(gw, gate)) for _ in range(2)]
    await until(lambda: busy(gw) == {"g0": 1, "g1": 1}, "back, it takes requests again")
    gate.set_result(None)
    await asyncio.gather(*tasks)
    await gw.close()


async def test_a_cold_alias_starts_one_replica_and_the_next_only_when_it_is_full() -> None:
    double, gw = setup(on_demand=True)
    double.auto = False
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cold = [asyncio.ensure_future(hold(gw, gate)) for _ in range(3)]
    await until(lambda: double.insts["g0"].state is State.STARTING, "the first loads")
    assert [c[:2] for c in double.commands] == [("g0", "Start")], "one copy for three"
    double.move("g0", State.RUNNING)
    # g0 serves one, and is full: one of the others starts g1, the third waits for a slot.
    await until(lambda: double.insts["g1"].state is State.STARTING, "the spare starts")
    assert [c[:2] for c in double.commands] == [("g0", "Start"), ("g1", "Start")]
    double.move("g1", State.RUNNING)
    await until(lambda: busy(gw) == {"g0": 1, "g1": 1}, "both serve")
    assert gw.balancer.waiting["q"] == 1
    gate.set_result(None)
    assert {u.name for u in await asyncio.gather(*cold)} == {"g0", "g1"}
    await gw.close()


async def test_a_spare_that_cannot_load_is_passed_over_for_the_replica_that_serves() -> None:
    double = Double()
    double.add(dataclasses.replace(spec("g0"), settings=ONE_SLOT, aliases=("q",)))
    spare = spec("g1", on_demand=True)
    double.add(dataclasses.replace(spare, settings=ONE_SLOT, aliases=("q",)), State.IDLE)
    double.broken.add("g1")  # out of memory, a bad file: its start fails
    gw = gateway(double)
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(3)]
    tasks = [asyncio.ensure_future(hold(gw, g)) for g in gates]
    # g0 is full: the others try the spare once, then wait for g0 rather than fail.
    await until(lambda: gw.balancer.waiting["q"] == 2, "both overflow requests wait")
    for gate, task in zip(gates, tasks, strict=True):
        gate.set_result(None)
        assert (await task).name == "g0"
    await gw.close()


async def test_a_relayed_request_is_balanced_here_and_counted_where_it_ran() -> None:
    _double, gw = setup()
    async with gw.lease("q", asking=Asked(relayed="front")) as upstream:
        assert gw.status_of(upstream.name)["relayed"] == {"front": 1}
    assert gw.status_of(upstream.name)["relayed"] == {}
    await gw.close()


async def test_the_alias_is_one_model_with_local_replicas_and_unloads_whole() -> None:
    double, gw = setup(on_demand=True)
    view = gw.find("q")
    assert view is not None
    assert (view.name, view.instances) == ("q", ("g0", "g1"))
    assert view.replicas == ("local/g0", "local/g1")
    assert [v.name for v in gw.models(ANYONE)] == ["g0", "g1", "q"]
    assert gw.find("g1").replicas == ("local",)  # type: ignore[union-attr]
    for name in ("g0", "g1"):
        double.move(name, State.RUNNING)
    assert gw.running("q") is not None
    await gw.unload("q")
    await until(lambda: {i.state for i in double.insts.values()} == {State.IDLE}, "both unload")
    await gw.close()


def test_a_peers_shared_alias_is_one_model_of_its_slots_together() -> None:
    def inst(name: str, state: str, slots: int, in_flight: int) -> dict[str, object]:
        gw = {"routable": True, "aliases": ["q"], "slots": slots, "in_flight": in_flight}
        return {"name": name, "state": state, "gateway": gw}

    found = models_of([inst("g0", "idle", 1, 0), inst("g1", "running", 2, 1)], "me")
    assert found["q"] == RemoteModel("q", (), "running", True, False, 3, 1)
    assert (found["g0"].slots, found["g1"].slots) == (1, 2)


async def test_each_replica_stops_when_idle_on_its_own() -> None:
    double, gw = setup(on_demand=True)
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(2)]
    # keep_alive 0 (Ollama's): each process stops once its own last request ends.
    first = asyncio.ensure_future(hold(gw, gates[0], keep=0))
    await until(lambda: busy(gw)["g0"] == 1, "g0 started and serves")
    second = asyncio.ensure_future(hold(gw, gates[1], keep=0))  # g0 full: the spare starts
    await until(lambda: busy(gw)["g1"] == 1, "g1 started and serves")
    gates[0].set_result(None)
    assert (await first).name == "g0"
    await until(lambda: double.insts["g0"].state is State.IDLE, "g0 idles on its own")
    assert double.insts["g1"].state is State.RUNNING
    gates[1].set_result(None)
    await second
    await until(lambda: double.insts["g1"].state is State.IDLE, "then g1")
    await gw.close()


async def test_a_key_uses_the_alias_only_if_it_may_use_every_replica() -> None:
    _double, gw = setup()
    both = Caller("both", frozenset({"g0", "g1"}))
    assert may_use(gw, both, "q")
    assert [v.name for v in gw.models(both)] == ["g0", "g1", "q"]
    one = Caller("one", frozenset({"g0"}))
    assert not may_use(gw, one, "q")
    assert may_use(gw, one, "g0")
    assert [v.name for v in gw.models(one)] == ["g0"]
    await gw.close()
