"""The gateway's last few stops with their causes, for `llamactl status` and the page:
"why did my model go?" answered after the event has scrolled past."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

KEPT = 8  # enough to see a run of evictions, few enough for a status table


class RecentStops:
    """A bounded record of stops, newest last; `Notes.stopped` is its only writer."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._stops: deque[dict[str, Any]] = deque(maxlen=KEPT)

    def add(self, model: str, reason: str, told: Mapping[str, str | None]) -> None:
        """Record that `model` stopped for `reason` (`evict`, `idle_timeout`, `unload`)."""
        self._stops.append({"model": model, "reason": reason, **told, "at": self.clock()})

    def to_list(self) -> list[dict[str, Any]]:
        """The stops kept, newest first (the status document's `gateway.recent_stops`)."""
        return [dict(s) for s in reversed(self._stops)]
