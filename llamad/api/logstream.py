"""`GET /v1/instances/{name}/logs`: the tail of an instance's log file, then what follows.

Following polls the file (every 0.2 s) rather than holding inotify watches per client,
and copes with rotation: a renamed file is read to its end, then the new one from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import IO

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from llamad.api.errors import error_response
from llamad.common.long_streams import LongStreams, refused
from llamad.listener.departure import departure

POLL_S = 0.2
_READ = "read"  # the control API's one limited key: its read token
_CHUNK = 64 * 1024


def tail_offset(fh: IO[bytes], lines: int) -> int:
    """Where the last `lines` lines of `fh` begin, reading backwards one block at a time."""
    end = fh.seek(0, os.SEEK_END)
    if lines == 0:
        return end
    pos, wanted = end, lines
    fh.seek(end - 1 if end else 0)
    if end and fh.read(1) == b"\n":
        wanted += 1  # the file's final newline ends the last line rather than starting one
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        fh.seek(pos)
        block = fh.read(step)
        count = block.count(b"\n")
        if count >= wanted:
            cut = len(block)
            for _ in range(wanted):
                cut = block.rindex(b"\n", 0, cut)
            return pos + cut + 1
        wanted -= count
    return 0


class LogStream(Response):
    """text/plain: the last N lines of a log, then (if following) what gets appended.

    Follows by polling, which works the same on every OS; a rotation (new inode) or a
    truncation (the file shrank) is read from its start.
    """

    def __init__(
        self,
        path: Path,
        lines: int,
        follow: bool,
        shutdown: asyncio.Event | None,
        streams: LongStreams | None = None,
    ) -> None:
        super().__init__(media_type="text/plain; charset=utf-8")
        self.path, self.lines, self.follow, self.shutdown = path, lines, follow, shutdown
        self.streams = streams  # a limited key's follow: one of its long-lived streams
        del self.headers["content-length"]  # streamed: chunked transfer encoding

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.streams is None:
            await self._serve(scope, receive, send)
            return
        if not self.streams.take(_READ):
            message = refused(self.streams.limit)
            await error_response(429, "too_many_streams", message)(scope, receive, send)
            return
        try:
            await self._serve(scope, receive, send)
        finally:
            self.streams.give(_READ)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()

        async def until_shutdown() -> None:
            if self.shutdown is not None:
                await self.shutdown.wait()
                stop.set()

        try:
            fh = self._open()
        except OSError as exc:  # e.g. permissions: say so rather than send an empty log
            message = f"cannot read {self.path}: {exc.strerror}"
            await error_response(500, "internal", message)(scope, receive, send)
            return
        # The listener tells of the client leaving; no task waits in `receive()` for it.
        leaving = departure(scope)
        if leaving is not None:
            leaving.watch(stop.set)
        watchers = [asyncio.create_task(until_shutdown())]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            if fh is not None:
                fh.seek(tail_offset(fh, self.lines))
                await self._drain(fh, send)
            while self.follow and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await stop.wait()
                fh = await self._follow_step(fh, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away mid-send (ASGI 2.4 servers raise instead of telling us)
        finally:
            for task in watchers:
                task.cancel()
            if leaving is not None:
                leaving.unwatch(stop.set)
            if fh is not None:
                fh.close()

    def _open(self) -> IO[bytes] | None:
        try:
            return self.path.open("rb")
        except FileNotFoundError:
            return None

    async def _drain(self, fh: IO[bytes], send: Send) -> None:
        while chunk := fh.read(_CHUNK):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def _follow_step(self, fh: IO[bytes] | None, send: Send) -> IO[bytes] | None:
        if fh is not None:
            await self._drain(fh, send)  # the rest of the old file, rotated or not
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return fh  # rotated away and not recreated yet
        if fh is None:
            fh = self._open()
        elif os.fstat(fh.fileno()).st_ino != st.st_ino:
            fh.close()
            fh = self._open()
        elif st.st_size < fh.tell():
            fh.seek(0)
        if fh is not None:
            await self._drain(fh, send)
        return fh
