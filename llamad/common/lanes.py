"""What a listener's lane (`api/lane.py`) and the code serving on it (the gateway's
`gateway/lane.py`) share: the request read whole, and the answer it is written to.

Here, below both, so that the gateway needs nothing of the listener's layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class LaneRequest:
    """A request the lane took, read whole: its headers are uvicorn's (names lower case)."""

    path: str
    query: bytes
    headers: Headers
    client: str | None
    body: bytes
    began: float  # perf_counter when its head had arrived


class LaneAnswer(Protocol):
    """Where a lane request's answer goes (`api/lane_cycle.LaneCycle`)."""

    # Told once when the request's task is over, however it ended: a task cancelled
    # before it starts never runs its coroutine's `finally`.
    ended: list[Callable[[], None]]

    async def send(self, message: Any) -> None:
        """Write ASGI's `http.response.start` or `http.response.body` message."""
        ...
