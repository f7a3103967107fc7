"""When a connection reads, writes and gives up: its deadline, its paused reads, its
waiting writes, and the check on a client that half-closed.

Reading pauses while the app has not taken what was read (`connection.HIGH_WATER`), and
the deadline stops with it: the time the listener does not read is not the client's.
Writing waits while the transport's buffer is past its high-water mark.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import weakref
from collections.abc import Callable

from llamad.common.deadline import Deadline


class Flow:
    """One connection's reads, writes and deadline; `on_due` when the deadline passes,
    `on_reset` when a half-closed client turns out to have closed."""

    __slots__ = ("__weakref__", "_check", "_drained", "_loop", "_on_due", "_on_reset",
                 "_suspended", "_timer", "paused", "transport", "write_paused")  # fmt: skip

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        on_due: Callable[[], None],
        on_reset: Callable[[], None],
    ) -> None:
        self.transport, self._loop = transport, loop
        self._on_due, self._on_reset = on_due, on_reset
        self.paused = self.write_paused = False
        self._suspended: float | None = None  # the deadline's time left while paused
        self._drained: asyncio.Future[None] | None = None
        self._check: asyncio.TimerHandle | None = None
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

    def resume_writing(self) -> None:
        self.write_paused = False
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def watch_reset(self, answering: Callable[[], bool]) -> None:
        """After a half-close: look for a reset, which says the client closed instead,
        until `answering()` (then the answer's own writes tell)."""
        self._check = self._loop.call_later(0.05, self._checked, 0.05, answering)

    def lost(self) -> None:
        """The connection closed: nothing waits on it any more."""
        self._timer.cancel()
        if self._check is not None:
            self._check.cancel()
        self.resume_writing()

    def _checked(self, delay: float, answering: Callable[[], bool]) -> None:
        self._check = None
        sock = self.transport.get_extra_info("socket")
        if sock is None or self.transport.is_closing() or answering():
            return
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self._on_reset()
            return
        delay = min(delay * 2, 1.0)
        self._check = self._loop.call_later(delay, self._checked, delay, answering)


def _fire(ref: weakref.ref[Flow]) -> None:
    flow = ref()
    if flow is not None:
        flow._on_due()
