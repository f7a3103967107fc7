"""A peer's room for one more model, from its status document: its GPUs' when it lists
them (a model goes to one GPU with room), else its RAM's."""

from __future__ import annotations

from typing import Any

import pytest

from llamad.gateway.fleet.peer_models import room_left

G = 1024**3


def gpu(name: str, left: int | None, unified: bool | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": name, "left_bytes": left}
    if unified is not None:
        doc["unified"] = unified
    return doc


@pytest.mark.parametrize(
    ("gateway", "room"),
    [
        pytest.param({"left_bytes": 9 * G}, 9 * G, id="RAM alone"),
        pytest.param({"left_bytes": 9 * G, "devices": []}, 9 * G, id="CPU build"),
        pytest.param({"left_bytes": 60 * G, "devices": [gpu("CUDA0", 3 * G),
                      gpu("CUDA1", 7 * G)]}, 7 * G, id="the GPU with most left"),
        pytest.param({"left_bytes": 4 * G, "devices": [gpu("Metal", 8 * G, True)]}, 4 * G,
                     id="Metal is RAM too"),
        pytest.param({"left_bytes": 40 * G, "devices": [gpu("Metal", 8 * G, True)]}, 8 * G,
                     id="Metal's working set"),
        pytest.param({"left_bytes": 9 * G, "devices": [gpu("CUDA0", None)]}, 9 * G,
                     id="budgets off: RAM's"),
        pytest.param({"devices": "junk", "left_bytes": "x"}, None, id="a peer that lies"),
        pytest.param({}, None, id="an older peer says nothing"),
    ],
)  # fmt: skip
def test_room_left(gateway: dict[str, Any], room: int | None) -> None:
    assert room_left(gateway) == room
