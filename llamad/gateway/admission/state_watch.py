"""Watching the models' states for the live event stream, and timing their loads.

The supervisor logs each change; the gateway looks every `TICK_S` instead of being
called from the supervisor's own task, so a slow or failing subscriber can never hold
an instance's state machine. A change shorter than a tick may go unseen: the stream
shows the states a person would see, not every step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from llamad.gateway.admission.progress import LoadProgress
from llamad.gateway.books.bus import EventBus
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State

TICK_S = 0.25
PROGRESS_EVERY = 2  # ticks between progress events of a loading model


class StateWatch:
    """Publishes `state` and `progress` events; feeds `LoadProgress`."""

    def __init__(
        self,
        supervisor: SupervisorView,
        bus: EventBus,
        progress: LoadProgress,
        size: Callable[[str], int | None],
    ) -> None:
        self.sup, self.bus, self.progress, self.size = supervisor, bus, progress, size
        self._last: dict[str, str] = {}
        self._ticks = 0

    async def run(self) -> None:
        """Look every TICK_S until cancelled."""
        while True:
            self.tick(time.monotonic())
            await asyncio.sleep(TICK_S)

    def tick(self, now: float) -> None:
        """One look at every instance."""
        self._ticks += 1
        names = self.sup.names()
        for name in names:
            facts = self.sup.facts(name)
            if facts is None:
                continue
            state = facts.state
            loading = state is State.STARTING
            size = self.size(name)
            self.progress.observe(name, loading, state is State.RUNNING, size, now)
            before = self._last.get(name)
            if before != state.value:
                self._last[name] = state.value
                if before is not None:
                    self.bus.publish("state", {"model": name, "from": before, "to": state.value})
            if loading and self._ticks % PROGRESS_EVERY == 0:
                self.bus.publish(
                    "progress", {"model": name, **(self.progress.of(name, size, now) or {})}
                )
        for gone in set(self._last) - set(names):
            del self._last[gone]
