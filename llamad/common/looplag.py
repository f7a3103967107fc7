"""How late the event loop is, measured around one wait.

The supervisor's probes share a loop with every listener. A flood on a listener can keep
that loop busy long enough that a probe's answer sits unread until its deadline has
passed: the server answered, we did not look. A `LagWatch` around the wait tells the two
apart: a timer re-armed every `interval` notes how late each firing comes, which is how
long the loop was busy elsewhere. It runs only while its `with` block does, so an idle
daemon pays nothing for it.
"""

from __future__ import annotations

import asyncio


class LagWatch:
    """The worst lateness of the running loop while the `with` block runs (seconds)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._worst = 0.0

    def __enter__(self) -> LagWatch:
        self._loop = asyncio.get_running_loop()
        self._schedule()
        return self

    def __exit__(self, *exc: object) -> None:
        self._worst = self.worst  # a firing still owed counts too
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def worst(self) -> float:
        """The worst lateness so far, counting a firing that is due and has not come: the
        loop may still be catching up when the wait ends."""
        if self._loop is None or self._handle is None:
            return self._worst
        return max(self._worst, self._loop.time() - self._due)

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + self.interval
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        self._worst = max(self._worst, self._loop.time() - self._due)
        self._schedule()
