"""What the gateway's loads and stops tell the live event stream.

`Notes` does nothing, for a scheduler nobody watches (tests, benchmarks); `BusNotes`
publishes each one on the event bus.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from llamad.gateway.admission.progress import LoadProgress
from llamad.gateway.books.bus import EventBus
from llamad.gateway.books.recent_stops import RecentStops


class Notes:
    """Hooks the loads and stops call as things happen; each does nothing here."""

    def load_requested(self, model: str, waiting: int) -> None:
        """A request started an on-demand load."""

    def loaded(self, model: str, seconds: float) -> None:
        """The load ended with the model serving."""

    def load_failed(self, model: str, reason: str) -> None:
        """The load ended without it."""

    def stopped(
        self, model: str, reason: str, size_bytes: int | None, told: Mapping[str, str | None]
    ) -> None:
        """The gateway stops the model: `evict`, `idle_timeout` or `unload`; `told` says
        its cause, the model it made room for and the set that took it along."""


class BusNotes(Notes):
    """Each note as an event on `bus`: `load` (with `phase`) or `stop` (with `reason`
    and `cause`); a load's duration also teaches `progress` (the watcher may miss a short
    run), and each stop is kept in `recent`."""

    def __init__(
        self,
        bus: EventBus,
        progress: LoadProgress,
        size: Callable[[str], int | None],
        recent: RecentStops,
    ) -> None:
        self.bus, self.progress, self.size, self.recent = bus, progress, size, recent

    def load_requested(self, model: str, waiting: int) -> None:
        self.bus.publish("load", {"model": model, "phase": "requested", "waiting": waiting})

    def loaded(self, model: str, seconds: float) -> None:
        self.progress.learned(model, seconds, self.size(model))
        self.bus.publish("load", {"model": model, "phase": "loaded", "seconds": round(seconds, 3)})

    def load_failed(self, model: str, reason: str) -> None:
        self.bus.publish("load", {"model": model, "phase": "failed", "reason": reason})

    def stopped(
        self, model: str, reason: str, size_bytes: int | None, told: Mapping[str, str | None]
    ) -> None:
        self.recent.add(model, reason, told)
        event = {"model": model, "reason": reason, "size_bytes": size_bytes, **told}
        self.bus.publish("stop", event)
