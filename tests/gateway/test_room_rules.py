"""Room under pins, groups and exclusive sets as table rows: `room_rules.arrange`."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from supervisor_double import Double, spec

from llamad.config.gateway_table import GatewayConfig
from llamad.config.model_sets import ModelSet
from llamad.gateway.admission.room import Loaded, plan
from llamad.gateway.admission.room_rules import Pinned, arrange, causes
from llamad.gateway.models.model_sets import ModelSets
from llamad.lifecycle.states import State


def _sets(pinned: set[str], groups: list[tuple[str, ...]], exclusive: list[tuple[str, ...]]):
    double = Double()
    for name in "abcde":
        double.add(dataclasses.replace(spec(name), pinned=name in pinned), State.RUNNING)
    cfg = GatewayConfig(
        host="127.0.0.1",
        port=1,
        groups=tuple(ModelSet(f"g{i}", g) for i, g in enumerate(groups)),
        exclusive=tuple(ModelSet(f"x{i}", x) for i, x in enumerate(exclusive)),
    )
    return ModelSets(double, lambda: cfg)


def m(name: str, used: float, busy: bool = False) -> Loaded:
    return Loaded(name, 0, True, busy, used)


@pytest.mark.parametrize(
    ("name", "loaded", "max_loaded", "pinned", "groups", "exclusive", "victims"),
    [
        pytest.param("c", [m("a", 1), m("b", 2)], 2, set(), [], [], ["a"], id="plain LRU"),
        pytest.param("c", [m("a", 1), m("b", 2)], 2, {"a"}, [], [], ["b"], id="pin skipped"),
        pytest.param(
            "c",
            [m("a", 1), m("b", 2)],
            2,
            set(),
            [("a", "b")],
            [],
            ["a", "b"],
            id="a victim takes its group",
        ),
        pytest.param(
            "c",
            [m("a", 1), m("b", 2, busy=True)],
            2,
            set(),
            [("a", "b")],
            [],
            ["a"],
            id="a busy companion stays",
        ),
        pytest.param(
            "b", [m("a", 1)], 1, set(), [("a", "b")], [], None, id="a group never evicts itself"
        ),
        pytest.param(
            "b",
            [m("a", 1), m("c", 2)],
            0,
            set(),
            [],
            [("a", "b")],
            ["a"],
            id="exclusive: the rival goes, the rest stay",
        ),
        pytest.param(
            "b",
            [m("a", 1, busy=True)],
            0,
            set(),
            [],
            [("a", "b")],
            None,
            id="exclusive: a busy rival finishes first",
        ),
        pytest.param(
            "b",
            [m("a", 1), m("c", 2)],
            0,
            set(),
            [("a", "c")],
            [("a", "b")],
            ["a", "c"],
            id="exclusive: the rival's group goes too",
        ),
    ],
)
def test_arrange(
    name: str,
    loaded: list[Loaded],
    max_loaded: int,
    pinned: set[str],
    groups: list[tuple[str, ...]],
    exclusive: list[tuple[str, ...]],
    victims: list[str] | None,
) -> None:
    sets = _sets(pinned, groups, exclusive)
    planner = functools.partial(plan, 0, max_loaded=max_loaded, budget=None)
    assert arrange(name, loaded, sets, planner) == victims


@pytest.mark.parametrize(
    ("loaded", "exclusive", "expected"),
    [
        pytest.param(
            [m("a", 1), m("b", 2)], [], "pinned model 'a' (evict = \"never\") holds", id="room"
        ),
        pytest.param([m("a", 1, busy=True)], [], "pinned model 'a'", id="busy pin"),
        pytest.param(
            [m("a", 1)], [("a", "c")], "is loaded and in exclusive set 'x0'", id="exclusive"
        ),
    ],
)
def test_a_pin_in_the_way_refuses(
    loaded: list[Loaded], exclusive: list[tuple[str, ...]], expected: str
) -> None:
    sets = _sets({"a", "b"}, [], exclusive)
    planner = functools.partial(plan, 0, max_loaded=1 if not exclusive else 0, budget=None)
    with pytest.raises(Pinned) as refused:
        arrange("c", loaded, sets, planner)
    assert expected in refused.value.message


@pytest.mark.parametrize(
    ("name", "victims", "max_loaded", "groups", "exclusive", "expected"),
    [
        pytest.param("c", ["a"], 2, [], [], {"a": ("max_loaded", None)}, id="the count"),
        pytest.param("c", ["a"], 0, [], [], {"a": ("memory", None)}, id="memory"),
        pytest.param("c", ["a"], 3, [], [], {"a": ("memory", None)}, id="memory under the count"),
        pytest.param(
            "c", ["a", "b"], 0, [("a", "b")], [], {"a": ("memory", None), "b": ("group", "g0")},
            id="a victim's group",
        ),
        pytest.param(
            "b", ["a"], 0, [], [("a", "b")], {"a": ("exclusive", "x0")}, id="an exclusive set"
        ),
    ],
)  # fmt: skip
def test_each_victim_gets_its_cause(
    name: str,
    victims: list[str],
    max_loaded: int,
    groups: list[tuple[str, ...]],
    exclusive: list[tuple[str, ...]],
    expected: dict[str, tuple[str, str | None]],
) -> None:
    sets = _sets(set(), groups, exclusive)
    loaded = [m("a", 1), m("b", 2)] if name == "c" else [m("a", 1)]
    why = causes(name, victims, loaded, sets, max_loaded)
    assert {v: (c.cause, c.set_name) for v, c in why.items()} == expected
    assert {c.for_model for c in why.values()} == {name}
