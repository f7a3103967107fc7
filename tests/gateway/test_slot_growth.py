"""What a finished request tells the prompt cache's background saves, alone: what its
slot holds now, not what it added."""

from __future__ import annotations

from typing import Any

import pytest

from llamad.gateway.books.activity import Tally
from llamad.gateway.books.slot_growth import SlotGrowth
from llamad.gateway.books.usage import Usage

pytestmark = pytest.mark.timeout(20)


class _Told:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def grew(self, instance: str, tokens: int, cached: int | None, evaluated: int | None) -> None:
        self.calls.append((instance, tokens))


@pytest.mark.parametrize(
    ("status", "host", "usage", "told"),
    [
        # The whole prompt, cached or evaluated, and the tokens generated: what the slot
        # holds, however few of them the request added.
        (200, None, Usage(900, 20, cached_tokens=880, evaluated_tokens=20), [("m", 920)]),
        (200, None, Usage(300, 5), [("m", 305)]),
        (200, None, Usage(), []),  # nothing said
        (500, None, Usage(300, 5), []),  # an error answer
        (200, "peer", Usage(300, 5), []),  # another host's instance
    ],
)
def test_what_a_request_added(status: int, host: str | None, usage: Usage, told: list[Any]) -> None:
    tally = Tally(route="/v1/chat/completions", client=None, key=None, began=0.0, wall=0.0)
    tally.instance, tally.host, tally.status, tally.usage = "m", host, status, usage
    saves = _Told()
    SlotGrowth(saves)(tally.record(1.0))
    assert saves.calls == told
