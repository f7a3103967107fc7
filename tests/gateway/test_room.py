"""Eviction choices as table rows: `room.plan` is pure."""

from __future__ import annotations

import pytest

from llamad.gateway.admission.room import Loaded, plan

G = 1024**3


def m(name: str, size: float, *, on_demand: bool = True, busy: bool = False, used: float = 0):
    return Loaded(name, int(size * G), on_demand, busy, used)


@pytest.mark.parametrize(
    ("need", "loaded", "max_loaded", "budget", "victims"),
    [
        pytest.param(1, [], 0, None, [], id="nothing loaded, no limits"),
        pytest.param(1, [m("a", 1, used=1), m("b", 1, used=2)], 2, None, ["a"], id="count: LRU"),
        pytest.param(1, [m("a", 1, used=2), m("b", 1, used=1)], 2, None, ["b"], id="count: LRU b"),
        pytest.param(1, [m("a", 1, busy=True), m("b", 1)], 1, None, None, id="count: all busy"),
        pytest.param(1, [m("a", 1, on_demand=False)], 1, None, [], id="always-on not counted"),
        pytest.param(4, [m("a", 2, used=1), m("b", 3, used=2)], 0, 8 * G, ["a"], id="memory"),
        pytest.param(6, [m("a", 2, used=1), m("b", 3, used=2)], 0, 8 * G, ["a", "b"],
                     id="memory: two go"),
        pytest.param(3, [m("a", 5, on_demand=False), m("b", 1)], 0, 8 * G, ["b"],
                     id="memory: always-on stays"),
        pytest.param(4, [m("a", 5, on_demand=False), m("b", 1, busy=True)], 0, 8 * G, None,
                     id="memory: wait for a busy one"),
        pytest.param(10, [m("a", 2)], 0, 8 * G, ["a"], id="bigger than the budget, alone"),
        pytest.param(10, [m("a", 2, busy=True)], 0, 8 * G, None, id="bigger, not alone"),
    ],
)  # fmt: skip
def test_plan(
    need: float,
    loaded: list[Loaded],
    max_loaded: int,
    budget: int | None,
    victims: list[str] | None,
) -> None:
    assert plan(int(need * G), loaded, max_loaded, budget) == victims
