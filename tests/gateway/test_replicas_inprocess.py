"""Balancing between replicas under forced interleavings, in process: a local instance
over the supervisor double and a peer whose status the test writes. No processes, no
sleeps: each request holds its lease until the test releases it."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from supervisor_double import Asked, Double, spec, until

from llamad.config.gateway_table import GatewayConfig
from llamad.fleet.table import Peer
from llamad.gateway.books.activity import Tally
from llamad.gateway.books.usage import NONE, Usage
from llamad.gateway.contract.port import QueueFull, UnknownModel, Upstream
from llamad.gateway.core import Gateway
from llamad.gateway.fleet.models import FleetModels, PeerModels
from llamad.gateway.fleet.peer_models import RemoteModel
from llamad.gateway.models.router import Router
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)


async def no_peers() -> dict[str, Peer]:
    return {}


def setup(
    peer_slots: int = 1, local_slots: int = 1, **settings: object
) -> tuple[Double, Gateway, PeerModels]:
    """Local `m0` (alias `m`) with `local_slots`, and peer b serving `m` with `peer_slots`:
    replicas of the alias they share (an instance's own name reaches it alone)."""
    double = Double()
    slots = (("LLAMA_ARG_N_PARALLEL", str(local_slots)),)
    m0 = dataclasses.replace(spec("m0", on_demand=False), settings=slots, aliases=("m",))
    double.add(m0, State.RUNNING)
    fleet = FleetModels(no_peers, Router(double).owns)
    entry = fleet.seen["b"] = PeerModels(Peer("b", "http://127.0.0.1:9"), "http://127.0.0.1:9")
    entry.models = {"m": RemoteModel("m", (), "running", True, False, peer_slots)}
    cfg = GatewayConfig(host="127.0.0.1", port=0, memory_budget=None, fleet=True, **settings)  # type: ignore[arg-type]
    return double, Gateway(double, lambda: cfg, fleet=fleet), entry


async def hold(
    gw: Gateway, release: asyncio.Future[None], body: object = None, usage: Usage = NONE
) -> Upstream:
    """Lease `m` until `release`; the answer then reports `usage` (its prompt's counts)."""
    tally = Tally(route="/v1/chat/completions", client=None, key=None)
    async with gw.lease("m", asking=Asked(body, tally=tally)) as upstream:
        await release
        tally.usage = usage
    return upstream


def where(upstream: Upstream) -> str:
    return upstream.host or "local"


async def test_a_request_goes_to_a_free_replica_and_waits_when_all_are_full() -> None:
    _double, gw, _ = setup()
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(3)]
    first = asyncio.ensure_future(hold(gw, gates[0]))
    second = asyncio.ensure_future(hold(gw, gates[1]))
    third = asyncio.ensure_future(hold(gw, gates[2]))
    await until(lambda: gw.balancer.waiting["m"] == 1, "the third waits at the gateway")
    assert gw.sched.slot("m0").in_flight == 1, "local took one, never two"
    assert gw.balancer.sent[("b", "m")] == 1
    gates[1].set_result(None)  # b frees its slot: the waiter takes it
    assert where(await second) == "b"
    await until(lambda: gw.balancer.waiting["m"] == 0, "the waiter admitted")
    assert gw.balancer.sent[("b", "m")] == 1
    assert gw.sched.slot("m0").in_flight == 1
    for gate in (gates[0], gates[2]):
        gate.set_result(None)
    assert {where(await first), where(await third)} == {"local", "b"}
    assert not gw.balancer.sent
    assert gw.sched.slot("m0").in_flight == 0
    await gw.close()


async def test_two_requests_in_one_step_never_take_the_same_last_slot() -> None:
    _double, gw, _ = setup()
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    tasks = [asyncio.ensure_future(hold(gw, gate)) for _ in range(2)]  # started together
    await until(
        lambda: gw.sched.slot("m0").in_flight + gw.balancer.sent[("b", "m")] == 2, "both in"
    )
    assert gw.sched.slot("m0").in_flight == 1
    assert gw.balancer.sent[("b", "m")] == 1
    gate.set_result(None)
    assert sorted(where(u) for u in await asyncio.gather(*tasks)) == ["b", "local"]
    await gw.close()


async def test_slots_a_peer_claims_draw_no_more_than_a_local_replica_would() -> None:
    _double, gw, _ = setup(peer_slots=100_000, local_slots=4)
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    tasks = []
    for _ in range(8):  # one at a time: each choice sees the marks of those before
        tasks.append(asyncio.ensure_future(hold(gw, gate)))
        await until(lambda: gw.sched.slot("m0").in_flight + sum(gw.balancer.sent.values())
                    == len(tasks), "admitted")  # fmt: skip
    # Counted as no bigger than local until local is full: they share the work.
    assert gw.sched.slot("m0").in_flight == 4
    assert gw.balancer.sent[("b", "m")] == 4
    ninth = asyncio.ensure_future(hold(gw, gate))  # local full: b's slots beyond take it
    await until(lambda: gw.balancer.sent[("b", "m")] == 5, "the ninth on b")
    gate.set_result(None)
    await asyncio.gather(*tasks, ninth)
    await gw.close()


async def test_a_peers_own_load_counts_and_the_queue_is_bounded() -> None:
    _double, gw, entry = setup(max_queue=1)
    entry.models["m"] = dataclasses.replace(entry.models["m"], in_flight=1)  # b is busy
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    first = asyncio.ensure_future(hold(gw, gate))
    second = asyncio.ensure_future(hold(gw, gate))
    await until(lambda: gw.balancer.waiting["m"] == 1, "the second waits: b said it is full")
    with pytest.raises(QueueFull):
        await hold(gw, gate)
    gate.set_result(None)
    assert [where(await first), where(await second)] == ["local", "local"]
    await gw.close()


async def test_the_next_turn_follows_its_prefix_unless_that_replica_is_full() -> None:
    _double, gw, _ = setup()
    loop = asyncio.get_running_loop()
    turn = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]}
    later = {
        "messages": [
            *turn["messages"],
            {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "more"},
        ]
    }  # type: ignore[list-item]
    hog: asyncio.Future[None] = loop.create_future()
    busy = asyncio.ensure_future(hold(gw, hog))  # no prompt, no home: balance puts it local
    await until(lambda: gw.sched.slot("m0").in_flight == 1, "local busy")
    done: asyncio.Future[None] = loop.create_future()
    done.set_result(None)
    reported = Usage(cached_tokens=0, evaluated_tokens=30, prompt_ms=10.0)
    assert where(await hold(gw, done, turn, reported)) == "b"  # local full: b serves turn 1
    hog.set_result(None)
    await busy
    assert where(await hold(gw, done, later)) == "b"  # local is free, but b holds the prefix
    async with gw.lease("m", asking=Asked(later, affinity=False)) as upstream:
        assert where(upstream) == "local"  # opted out: the free local slot wins
    await gw.close()


async def test_a_failed_replica_hands_the_request_to_another_and_is_skipped() -> None:
    _double, gw, entry = setup()
    loop = asyncio.get_running_loop()
    hog: asyncio.Future[None] = loop.create_future()
    busy = asyncio.ensure_future(hold(gw, hog))  # local busy: the next goes to b
    await until(lambda: gw.sched.slot("m0").in_flight == 1, "local busy")
    async with gw.lease("m") as upstream:
        assert where(upstream) == "b"
        moved = asyncio.ensure_future(gw.restarted(upstream))  # b refused before answering
        await until(lambda: gw.balancer.waiting["m"] == 1, "the failover waits for local")
        assert entry.error is not None, "b is marked away"
        assert not gw.balancer.sent
        hog.set_result(None)
        again = await moved
        assert again is not None
        assert where(again) == "local"
        assert await gw.restarted(again) is None  # once: a second failure is the answer
    await busy
    async with gw.lease("m") as upstream:  # b stays skipped until a refresh finds it back
        assert where(upstream) == "local"
    await gw.close()


async def test_concurrent_cold_requests_start_one_copy_not_one_each() -> None:
    double, gw, entry = setup()
    double.auto = False  # a Start leaves the local copy loading until the test moves it
    double.insts["m0"].spec = dataclasses.replace(double.insts["m0"].spec, on_demand=True)
    double.move("m0", State.IDLE)
    entry.models["m"] = dataclasses.replace(entry.models["m"], state="idle", loaded=False)
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    tasks = [asyncio.ensure_future(hold(gw, gate)) for _ in range(5)]
    # One waits on the load (its one slot), four at the gateway: they take whichever
    # replica frees first.
    await until(lambda: gw.balancer.waiting["m"] == 4, "four wait at the gateway")
    assert gw.sched.slot("m0").waiting == 1
    await until(lambda: double.insts["m0"].state is State.STARTING, "the one load started")
    assert [c for c in double.commands if c[1] == "Start"] == [("m0", "Start", 0)]
    assert not gw.balancer.sent, "no copy started on the peer"
    double.move("m0", State.RUNNING)
    gate.set_result(None)
    assert {where(u) for u in await asyncio.gather(*tasks)} == {"local"}
    await gw.close()


async def test_cold_peers_get_one_copy_where_the_most_memory_is_left() -> None:
    double, gw, entry = setup()
    double.remove("m0")
    more = gw.fleet.seen["c"] = PeerModels(Peer("c", "http://127.0.0.1:8"), "http://127.0.0.1:8")  # type: ignore[union-attr]
    more.models = {"m": RemoteModel("m", (), "idle", False, True)}
    more.left_bytes, entry.left_bytes = 8 << 30, 2 << 30
    entry.models["m"] = dataclasses.replace(entry.models["m"], state="idle", loaded=False)
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    tasks = [asyncio.ensure_future(hold(gw, gate)) for _ in range(4)]
    await until(lambda: sum(gw.balancer.sent.values()) == 4, "all four sent")
    assert gw.balancer.sent == {("c", "m"): 4}
    gate.set_result(None)
    await asyncio.gather(*tasks)
    await gw.close()


async def test_a_relayed_request_is_served_here_or_refused_never_relayed_again() -> None:
    double, gw, _ = setup()
    relayed = Asked(relayed="frontid")
    async with gw.lease("m", asking=relayed) as upstream:  # local is served here, even with b free
        assert where(upstream) == "local"
        assert gw.status_of("m0")["relayed"] == {"frontid": 1}
    assert gw.status_of("m0")["relayed"] == {}
    double.remove("m0")  # b's copy only: not relayed on
    with pytest.raises(UnknownModel):
        async with gw.lease("m", asking=relayed):
            pass
    await gw.close()
