"""A local replica's own server count in the balance, in process: the rule as a table,
a stand-in reading steering requests, stale and failed reads ignored."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from supervisor_double import Double, gateway, spec, until

from llamad.backends.llama_serving import llama_serving
from llamad.gateway.core import Gateway
from llamad.gateway.replicas.replica import LOCAL, Replica
from llamad.gateway.replicas.server_busy import STALE_S, Reading, counted, parse_slots
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)


def local(busy: int, slots: int = 2) -> Replica:
    return Replica(host=LOCAL, instance="r0", slots=slots, busy=busy)


# (ours in flight now, server's processing, ours it counted then, its slots) -> (busy, slots)
RULE = [
    ((0, 0, 0, 2), (0, 2)),  # idle everywhere
    ((1, 1, 1, 2), (1, 2)),  # the one it runs is ours
    ((0, 1, 0, 2), (1, 2)),  # another client's, straight to its port
    ((1, 2, 1, 2), (2, 2)),  # ours and another's
    ((2, 1, 1, 2), (2, 2)),  # one of ours began since: ours alone count then
    ((0, 1, 1, 2), (0, 2)),  # ours it counted has ended since
    ((1, 0, 0, 2), (1, 2)),  # ours not yet arrived there: never less than ours
    ((0, 3, 0, 4), (3, 4)),  # the server's own slot count replaces the guess
    ((0, 0, 0, 0), (0, 2)),  # a server listing no slots keeps the guess
]


@pytest.mark.parametrize(("given", "expected"), RULE)
def test_busy_is_the_servers_less_ours_then_plus_ours_now(
    given: tuple[int, int, int, int], expected: tuple[int, int]
) -> None:
    ours_now, processing, ours_then, slots = given
    seen = counted(local(ours_now), Reading(processing, slots, ours_then, at=10.0), now=10.5)
    assert (seen.busy, seen.slots) == expected


def test_a_stale_or_missing_reading_changes_nothing() -> None:
    r = local(1)
    assert counted(r, None, now=10.0) == r
    assert counted(r, Reading(2, 2, 0, at=10.0), now=10.0 + STALE_S + 0.1) == r


def test_slots_answers_parse_and_others_do_not() -> None:
    slots = [{"id": 0, "is_processing": True}, {"id": 1, "is_processing": False}]
    assert parse_slots(slots) == (1, 2)
    assert parse_slots({"error": {"code": 503}}) is None
    assert parse_slots(["x"]) is None


def test_llama_server_lists_slots_unless_turned_off() -> None:
    assert llama_serving({}).busy_path == "/slots"
    assert llama_serving({"LLAMA_ARG_ENDPOINT_SLOTS": "0"}).busy_path is None


def setup() -> tuple[Double, Gateway]:
    """g0 and g1, one slot each, both answering to alias `q`."""
    double = Double()
    for name in ("g0", "g1"):
        s = dataclasses.replace(
            spec(name, on_demand=False), settings=(("LLAMA_ARG_N_PARALLEL", "1"),), aliases=("q",)
        )
        double.add(s, State.RUNNING)
    return double, gateway(double)


async def lease_one(gw: Gateway, release: asyncio.Future[None], took: list[str]) -> None:
    async with gw.lease("q") as upstream:
        took.append(upstream.name)
        await release


async def test_a_server_busy_past_the_gateway_gets_no_request_until_its_reading_ages() -> None:
    _double, gw = setup()
    assert {f.name for f in gw.busy.targets()} == {"g0", "g1"}
    gw.busy.readings["g0"] = Reading(1, 1, 0, at=gw.busy.clock())  # a direct client's
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(2)]
    took: list[str] = []
    tasks = [asyncio.ensure_future(lease_one(gw, g, took)) for g in gates]
    await until(lambda: took == ["g1"] and gw.balancer.waiting["q"] == 1, "g1, then a wait")
    # The reading goes stale: g0 counts as the gateway alone sees it, free.
    gw.busy.readings["g0"] = Reading(1, 1, 0, at=gw.busy.clock() - STALE_S - 1)
    await until(lambda: took == ["g1", "g0"], "the waiter takes g0")
    for gate in gates:
        gate.set_result(None)
    await asyncio.gather(*tasks)


async def test_a_failed_read_leaves_no_reading() -> None:
    _double, gw = setup()  # port 9: nothing answers there
    task = asyncio.ensure_future(gw.busy.run())
    try:
        await until(lambda: gw.busy.rounds >= 2, "two rounds of reads")
        assert gw.busy.readings == {}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
