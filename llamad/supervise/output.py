"""A child's output pipe, read in gathers: at most one wake-up per `GATHER_S` while the
child logs a little, which llama-server does, several lines per request.

Reading pauses for `GATHER_S` after a small read, so what the child writes meanwhile
waits in the pipe (widened where the OS allows) and comes in with the next read: the
daemon's loop, which relays the gateway's requests too, is not woken for each line. A
large read (a verbose child) is followed at once by the next one, so a busy writer never
waits on a full pipe for long. Once the child has exited, the rest is read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Callable
from typing import cast

GATHER_S = 0.05
# A read this large means a verbose child: the next one goes on at once.
_BUSY = 32 * 1024
# Room for what a busy llama-server writes while reading pauses (Linux; others keep theirs).
_PIPE_BYTES = 1024 * 1024


def pipe() -> tuple[int, int]:
    """A pipe for a child's output, (read end, write end), widened where the OS allows."""
    read_fd, write_fd = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        with contextlib.suppress(OSError):  # past the system's limit: the default is kept
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    return read_fd, write_fd


class Output(asyncio.Protocol):
    """Reads a child's output pipe and hands on its complete lines, a read at a time."""

    def __init__(self, lines: Callable[[list[bytes]], None]) -> None:
        self._lines = lines
        self._partial = b""
        self._transport: asyncio.ReadTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._hurry = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.ReadTransport's methods, not its class.
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        if lines:
            self._lines(lines)
        if len(data) < _BUSY and not self._hurry and self._timer is None:
            assert self._transport is not None
            self._transport.pause_reading()
            self._timer = asyncio.get_running_loop().call_later(GATHER_S, self._resume)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._partial:
            self._lines([self._partial])
            self._partial = b""
        if not self.closed.done():
            self.closed.set_result(None)

    def _resume(self) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    async def drain(self, timeout: float) -> None:
        """Read what is left now, until the pipe closes or `timeout` passes: a grandchild
        holding the pipe open must not keep the child's exit from being reported."""
        self._hurry = True
        if self._timer is not None:
            self._timer.cancel()
            self._resume()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout)
        except TimeoutError:
            if self._transport is not None:
                self._transport.close()
