"""A deadline that is set, moved and cleared for the price of an attribute.

A guarded connection sets a deadline at every turn of every request (its head, its
body, the idle wait after its answer), and a kept upstream connection one each time it
goes back to the pool; with a timer apiece, that is two timers made and cancelled per
relayed request, on the loop that relays. Here one timer serves all of them: it is
moved only when a deadline comes sooner than it fires, and when it fires before the
deadline (which was moved later meanwhile) it is set again for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# uvloop keeps time in whole milliseconds and rounds a timer's delay to them: a deadline
# less than this away is reached (else a timer a fraction of a millisecond early would
# be set again, at once, until the clock ticks).
_SLACK_S = 0.001


class Deadline:
    """Calls `on_due` once the deadline last `set` passes, unless `clear`ed first."""

    __slots__ = ("_due", "_loop", "_on_due", "_timer", "_timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_due: Callable[[], None]) -> None:
        """A loop may keep a cancelled timer's callback until its time: where that
        matters, `on_due` holds its owner through a weak reference."""
        self._loop, self._on_due = loop, on_due
        self._due: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    @property
    def due(self) -> float | None:
        """The loop time the deadline falls at; None when none is set."""
        return self._due

    def set(self, delay: float) -> None:
        """The deadline is `delay` seconds from now, whatever it was."""
        due = self._loop.time() + delay
        self._due = due
        if self._timer is None or due < self._timer_at:
            self._start(due)

    def clear(self) -> None:
        """No deadline; the timer, when it fires, finds nothing due."""
        self._due = None

    def cancel(self) -> None:
        """No deadline ever again (the owner is gone): the timer goes too."""
        self._due = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self._loop.call_at(when, self._fired), when

    def _fired(self) -> None:
        self._timer = None
        due = self._due
        if due is None:
            return
        if due - self._loop.time() > _SLACK_S:
            self._start(due)  # moved later since this timer was set
            return
        self._due = None
        self._on_due()
