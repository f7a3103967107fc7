"""Where the gateway starts a model its config does not place, as tables: the choice of
a GPU, and the one rule that says whether the config already places it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from llamad.backends.devices.placed import placed, says_where
from llamad.backends.spec import InstanceSpec
from llamad.gateway.admission.devices.choice import choose
from llamad.gateway.admission.devices.fit import Holding
from llamad.gateway.admission.devices.placement import RAM
from llamad.gateway.admission.room import Loaded

G = 1024**3
BUDGETS: dict[str, int | None] = {RAM: 64 * G, "CUDA0": 20 * G, "CUDA1": 10 * G}


def held(name: str, on_demand: bool = True, **on: float) -> Holding:
    size = {d: int(v * G) for d, v in on.items()}
    return Holding(Loaded(name, size.get(RAM, 0), on_demand, False, 0.0), size)


def needs(size: float) -> dict[str | None, dict[str, int]]:
    """A model of `size` GiB, all offloaded: alone on each GPU, or spread 2:1."""
    whole = int(size * G)
    return {
        "CUDA0": {"CUDA0": whole, RAM: 0},
        "CUDA1": {"CUDA1": whole, RAM: 0},
        None: {"CUDA0": whole * 2 // 3, "CUDA1": whole // 3, RAM: 0},
    }


@pytest.mark.parametrize(
    ("size", "loaded", "stay", "place"),
    [
        pytest.param(4, [], (), "CUDA0", id="empty: the most room left"),
        pytest.param(4, [held("a", CUDA0=18)], (), "CUDA1", id="the GPU with room"),
        pytest.param(8, [held("a", CUDA0=6)], (), "CUDA0", id="most left after it"),
        pytest.param(9, [held("a", CUDA0=12), held("b", CUDA1=0.5)], (), "CUDA1",
                     id="fits one, not the other"),
        pytest.param(24, [], (), None, id="fits no GPU alone: spread"),
        pytest.param(12, [held("a", CUDA0=10), held("b", CUDA1=2)], (), None,
                     id="spread fits now"),
        pytest.param(12, [held("a", CUDA0=15), held("b", CUDA1=2)], (), "CUDA0",
                     id="no room now: the GPU that can make it"),
        pytest.param(9, [held("a", CUDA0=15), held("b", CUDA1=6)], (), "CUDA0",
                     id="both can make it: the one with most room now"),
        pytest.param(12, [held("a", CUDA0=15), held("b", CUDA1=2)], ("a",), None,
                     id="a pinned model stays: spread"),
        pytest.param(12, [held("a", False, CUDA0=10), held("b", CUDA1=1)], (), None,
                     id="an always-on model stays"),
        pytest.param(40, [], (), None, id="fits nowhere: spread, for the refusal"),
    ],
)  # fmt: skip
def test_choose(
    size: float, loaded: list[Holding], stay: tuple[str, ...], place: str | None
) -> None:
    assert choose(needs(size), loaded, BUDGETS, stay) == place


def test_nothing_to_choose() -> None:
    assert choose({None: {"CUDA0": G, RAM: 0}}, [], BUDGETS) is None  # the config says
    assert choose(needs(4), [], {RAM: None}) is None  # budgets off
    assert choose(needs(4), [], {RAM: 64 * G}) is None  # no GPU budgets


SPEC = InstanceSpec("m", "127.0.0.1", 8080, None, (("LLAMA_ARG_CTX_SIZE", "512"),), (), ())


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        pytest.param({}, False, id="nothing said"),
        pytest.param({"settings": (("LLAMA_ARG_DEVICE", "CUDA1"),)}, True, id="device"),
        pytest.param({"settings": (("LLAMA_ARG_SPLIT_MODE", "row"),)}, True, id="split mode"),
        pytest.param({"settings": (("LLAMA_ARG_TENSOR_SPLIT", "3,1"),)}, True, id="tensor split"),
        pytest.param({"settings": (("LLAMA_ARG_N_GPU_LAYERS", "0"),)}, True, id="ngl 0"),
        pytest.param({"settings": (("LLAMA_ARG_N_GPU_LAYERS", "20"),)}, False, id="ngl 20"),
        pytest.param({"args": ("--device", "CUDA0")}, True, id="--device in args"),
        pytest.param({"args": ("-ts=3,1",)}, True, id="-ts= in args"),
        pytest.param({"args": ("-ngl", "10")}, False, id="-ngl in args: as in settings"),
        pytest.param({"kind": "mlx"}, True, id="not llama-server"),
        pytest.param({"settings": (("LLAMA_ARG_RPC", "10.0.0.2:50052"),)}, True, id="rpc"),
        pytest.param({"workers": ("w1",)}, True, id="an rpc head"),
        pytest.param({"remote_workers": (("peer", "w1"),)}, True, id="a fleet rpc head"),
    ],
)  # fmt: skip
def test_says_where(changes: dict[str, Any], says: bool) -> None:
    assert says_where(replace(SPEC, **changes)) is says


def test_placed_adds_the_device_to_the_settings() -> None:
    assert placed(SPEC, None) is SPEC
    assert dict(placed(SPEC, "CUDA1").settings) == {
        "LLAMA_ARG_CTX_SIZE": "512",
        "LLAMA_ARG_DEVICE": "CUDA1",
    }
    named = replace(SPEC, settings=(("LLAMA_ARG_DEVICE", "CUDA0"),))
    assert placed(named, "CUDA1") is named  # the config's word wins
