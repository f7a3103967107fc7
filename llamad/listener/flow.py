"""When a connection reads, writes and gives up: its deadline, its paused reads, and its
waiting writes and their deadline.

Reading pauses while the app has not taken what was read (`connection.HIGH_WATER`), and
the deadline stops with it: the time the listener does not read is not the client's.
Writing waits while the transport's buffer is past its high-water mark; a buffer that
stays there without shrinking for `send_timeout` (nginx's `send_timeout`) is a client
that stopped reading: the connection is aborted, and its requests see the client gone.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable

from llamad.common.deadline import Deadline


class Flow:
    """One connection's reads, writes and deadline; `on_due` when the deadline passes,
    `on_stalled` when its writes have made no progress for `send_timeout` seconds."""

    __slots__ = ("__weakref__", "_drained", "_left", "_loop", "_on_due", "_on_stalled",
                 "_stall", "_suspended", "_timer", "paused", "send_timeout", "transport",
                 "write_paused")  # fmt: skip

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        on_due: Callable[[], None],
        on_stalled: Callable[[], None],
        send_timeout: float,
    ) -> None:
        self.transport, self._loop = transport, loop
        self._on_due, self._on_stalled = on_due, on_stalled
        self.send_timeout = send_timeout
        self.paused = self.write_paused = False
        self._suspended: float | None = None  # the deadline's time left while paused
        self._drained: asyncio.Future[None] | None = None
        self._stall: asyncio.TimerHandle | None = None  # the writes' deadline
        self._left = 0  # bytes the buffer held when that deadline was set
        # Through a weak reference: however a loop keeps a cancelled timer's callback, a
        # closed connection's objects never wait for the timer's time.
        self._timer = Deadline(loop, functools.partial(_fire, weakref.ref(self)))

    @property
    def armed(self) -> bool:
        """A deadline is set (running, or stopped while reading is paused)."""
        return self._timer.due is not None or self._suspended is not None

    def arm(self, delay: float) -> None:
        """The deadline is `delay` seconds of reading from now."""
        if self.paused:
            self._suspended = delay
        else:
            self._timer.set(delay)

    def disarm(self) -> None:
        self._suspended = None
        self._timer.clear()

    def pause(self) -> None:
        """Stop reading (and the deadline) until `resume`."""
        if self.paused or self.transport.is_closing():
            return
        self.paused = True
        self.transport.pause_reading()
        due = self._timer.due
        if due is not None:
            self._suspended = max(due - self._loop.time(), 0.0)
            self._timer.clear()

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self.transport.resume_reading()
        if self._suspended is not None:
            self._timer.set(self._suspended)
            self._suspended = None

    async def drain(self) -> None:
        """Return once the transport takes writes again (or the connection is gone)."""
        if self.write_paused and not self.transport.is_closing():
            if self._drained is None:
                self._drained = self._loop.create_future()
            await self._drained

    def pause_writing(self) -> None:
        self.write_paused = True
        self._watch_writes()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def lost(self) -> None:
        """The connection closed: nothing waits on it any more, and its callbacks (its
        connection's) are let go, so that the two are not a cycle left to the collector."""
        self._timer.cancel()
        self.resume_writing()
        self._on_due = self._on_stalled = _nothing

    def _watch_writes(self) -> None:
        self._left = self.transport.get_write_buffer_size()
        self._stall = self._loop.call_later(self.send_timeout, self._stalled)

    def _stalled(self) -> None:
        self._stall = None
        if not self.write_paused or self.transport.is_closing():
            return
        if self.transport.get_write_buffer_size() < self._left:
            self._watch_writes()  # slow, but the client reads: a new deadline
            return
        self._on_stalled()


def _nothing() -> None:
    pass


def _fire(ref: weakref.ref[Flow]) -> None:
    flow = ref()
    if flow is not None:
        flow._on_due()
