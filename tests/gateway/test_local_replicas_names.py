"""A shared alias asked for in another letter case, and the load a request by the alias
waits for, in process: the supervisor double stands in for the instances and the test
moves their states and feeds the load estimates itself."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from supervisor_double import Double, gateway, spec, until

from llamad.gateway.contract.port import Upstream
from llamad.gateway.core import Gateway
from llamad.gateway.ollama.upstream import resolve
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)

ONE_SLOT = (("LLAMA_ARG_N_PARALLEL", "1"),)


def setup(state: State = State.RUNNING, **more: tuple[str, ...]) -> tuple[Double, Gateway]:
    """g0 and g1, one slot each, on demand, both answering to alias `q`; `more` adds
    instances with the given aliases."""
    double = Double(auto=False)
    for name, aliases in {"g0": ("q",), "g1": ("q",), **more}.items():
        s = dataclasses.replace(spec(name), settings=ONE_SLOT, aliases=aliases)
        double.add(s, state)
    return double, gateway(double)


async def test_a_shared_alias_in_another_case_is_the_alias() -> None:
    _double, gw = setup()
    for asked in ("Q", "q"):
        view = gw.find(asked)
        assert view is not None, asked
        assert (view.name, view.instances) == ("q", ("g0", "g1"))
    assert resolve(gw, "Q:latest").name == "q"  # as Ollama names it
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def hold(asked: str) -> Upstream:
        async with gw.lease(asked) as upstream:
            await gate
        return upstream

    # Both spellings are one model: one balance over the replicas, one queue.
    tasks = [asyncio.ensure_future(hold(asked)) for asked in ("Q", "q", "Q")]
    await until(lambda: gw.balancer.waiting["q"] == 1, "the third waits, by either name")
    assert {n: gw.sched.slot(n).in_flight for n in ("g0", "g1")} == {"g0": 1, "g1": 1}
    gate.set_result(None)
    assert {u.name for u in await asyncio.gather(*tasks)} == {"g0", "g1"}
    assert gw.running("Q") is not None
    await gw.close()


async def test_names_that_differ_only_in_case_stay_apart() -> None:
    _double, gw = setup(QQ=(), g2=("qq",), g3=("qq",))
    assert gw.find("QQ").instances == ()  # type: ignore[union-attr]  # the instance, exactly
    assert gw.find("qq").instances == ("g2", "g3")  # type: ignore[union-attr]
    assert gw.find("Qq") is None  # a third spelling: neither is picked
    await gw.close()


async def test_the_alias_shows_the_load_a_request_by_it_waits_for() -> None:
    double, gw = setup(State.IDLE)
    view = gw.find("q")
    assert view is not None
    assert (view.state, view.load_progress) == ("idle", None)
    now = time.monotonic()
    # g1 loads, g0 stays idle: the alias loads (not the first replica's idle).
    double.move("g1", State.STARTING)
    gw.progress.observe("g1", loading=True, running=False, size=None, now=now - 5)
    view = gw.find("Q")
    assert view is not None
    assert view.state == "starting"
    assert view.load_progress is not None
    assert view.load_progress["elapsed_s"] == pytest.approx(5, abs=1), "g1's load"
    assert gw.load_progress("Q") is not None
    # Both load: the one furthest along by its estimate, though g0 began earlier.
    gw.progress.learned("g0", 100.0, None)  # 100 s per GB: 10 s in is 10 %
    gw.progress.learned("g1", 10.0, None)  # 10 s per GB: 5 s in is 50 %
    double.move("g0", State.STARTING)
    gw.progress.observe("g0", loading=True, running=False, size=None, now=now - 10)
    gw.progress.observe("g1", loading=True, running=False, size=None, now=now - 5)
    progress = gw.load_progress("q")
    assert progress is not None
    assert progress["fraction"] == pytest.approx(0.5, abs=0.05)
    # One serves: a request by the alias waits for no load.
    double.move("g0", State.RUNNING)
    view = gw.find("q")
    assert view is not None
    assert (view.state, view.loaded) == ("running", True)
    assert view.load_progress is None
    assert gw.load_progress("q") is None
    assert gw.views.load_progress("g1") is not None, "g1's own entry still shows its load"
    await gw.close()
