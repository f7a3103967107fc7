"""One answer on the lane (`lane.py`), written straight onto its connection.

It stands where uvicorn's request cycle would, and holds what uvicorn's protocol reads
of one (`response_complete`, `disconnected`, `keep_alive`, `message_event`), so that its
pipelining, its keep-alive and its graceful shutdown treat a lane request as their own.
`send` takes ASGI's two response messages, so the code that writes an answer through an
app's `send` writes it here unchanged; what it skips is uvicorn's checking of each
header, which only the gateway's own code writes on the lane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE

_FAILED = (
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nInternal Server Error"
)


class LaneCycle:
    """One lane request's answer and its client's leaving (`common.lanes.LaneAnswer`)."""

    def __init__(
        self,
        transport: asyncio.Transport,
        flow: FlowControl,
        default_headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
        on_response: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.transport, self.flow, self.loop = transport, flow, loop
        self.default_headers = default_headers
        self.keep_alive = keep_alive
        self.on_response = on_response
        self.response_started = self.response_complete = self.disconnected = False
        self.message_event = self  # uvicorn sets it when the client goes: see `set`
        self.task: asyncio.Task[None] | None = None
        # Told once when the request's task is over, however it ended.
        self.ended: list[Callable[[], None]] = []
        self._chunked = False
        self._left: int | None = None  # body bytes the head's Content-Length still owes
        self._held = b""  # the head, written with the first body bytes that follow it

    def run(self, task: asyncio.Task[None]) -> None:
        """`task` serves the request: cancelled if its client goes."""
        self.task = task

    def set(self) -> None:
        """The client went (or the guard refused it): its work is cancelled, which
        closes its upstream connection, as the app's would be."""
        if self.disconnected and self.task is not None:
            self.task.cancel()

    def lost(self) -> None:
        """The connection closed: what uvicorn tells its own cycle, for when a request
        pipelined behind this one holds uvicorn's place."""
        if not (self.response_complete or self.disconnected):
            self.disconnected = True
            self.set()

    async def send(self, message: Any) -> None:
        """Write ASGI's `http.response.start` or `http.response.body` message."""
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected or self.response_complete:
            return
        if message["type"] == "http.response.start":
            self._start(message["status"], message.get("headers", ()))
            return
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        if self._chunked:
            data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more:
                data += b"0\r\n\r\n"
        else:
            data = body
            if self._left is not None:
                self._left -= len(body)
        if self._held:
            data, self._held = self._held + data, b""
        if data:
            self.transport.write(data)
        if not more:
            self.response_complete = True
            # An answer shorter than its Content-Length (the upstream broke off) or longer
            # would be read into the next one's: the connection goes with it, as uvicorn's.
            if not self.keep_alive or self._left:
                self.transport.close()
            self.on_response()

    def _start(self, status: int, headers: Any) -> None:
        if self.response_started:
            raise RuntimeError("the answer has started already")
        self.response_started = True
        head = [STATUS_LINE[status]]
        chunked = status not in (204, 304)
        for name, value in (*self.default_headers, *headers):
            if chunked and name.lower() == b"content-length":
                chunked, self._left = False, int(value)
            head += [name, b": ", value, b"\r\n"]
        if not self.keep_alive:
            head.append(b"connection: close\r\n")
        if chunked:
            head.append(b"transfer-encoding: chunked\r\n")
        head.append(b"\r\n")
        self._chunked = chunked
        # Held until the body's first bytes, which usually follow at once (one write, not
        # two); flushed at the loop's next turn when the body has to be waited for.
        self._held = b"".join(head)
        self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        if self._held and not self.transport.is_closing():
            self.transport.write(self._held)
        self._held = b""

    def finish(self) -> None:
        """The request's task is over: tell `ended`, and answer 500 if it never
        answered (a bug: its failure is logged)."""
        ended, self.ended = self.ended, []
        for callback in ended:
            callback()
        if not self.response_started and not self.transport.is_closing():
            self.response_started = True
            self.transport.write(_FAILED)
            self.transport.close()
