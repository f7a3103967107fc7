"""One request and its answer: the app's ASGI `receive` and `send`, and the answer framed.

An answer with a Content-Length goes as it is, one without as chunks (or, to HTTP/1.0,
until the close); a HEAD's, a 204's and a 304's carry no body. Its head is held until
its first body bytes, so that a whole answer is one write, and goes alone at the loop's
next turn when the app has something to wait for first. An app that fails before its
answer is answered 500; one that fails in the middle of it has its connection closed, so
that no client reads half an answer as the whole.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import structlog

from llamad.listener.answers import CONTINUE, date_line, server_error, status_line
from llamad.listener.departure import DEPARTURE, Departure
from llamad.listener.flow import Flow

log = structlog.get_logger("llamad.listener")

# What h11 writes (RFC 9110 5.1 and 5.5): a name is a token; a value has no NUL, no CR or
# LF, and no white space at either end.
_NAME = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")

Message = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class Wire(Protocol):
    """What an exchange needs of its connection."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    flow: Flow

    def taken(self) -> None: ...  # the app took body bytes: reading may go on
    def watched(self) -> None: ...  # the app waits on the client: read, to see it leave
    def keeps(self) -> bool: ...  # the connection may stay open after this answer
    def answered(self, exchange: Exchange) -> None: ...


class Exchange:
    """One request's ASGI side, from its head to the end of its answer."""

    __slots__ = ("_bodiless", "_chunked", "_held", "_left", "_told", "_until", "body",
                 "complete", "departure", "expect", "http10", "keep_alive", "more",
                 "scope", "started", "wire", "written")  # fmt: skip

    def __init__(self, wire: Wire, scope: Scope, keep_alive: bool, expect: bool) -> None:
        self.wire, self.scope, self.keep_alive, self.expect = wire, scope, keep_alive, expect
        self.http10 = scope["http_version"] == "1.0"
        self.body: bytes | bytearray = b""  # received, not yet taken by the app
        self.more = True  # more of the body is to come
        self.started = self.written = self.complete = False
        # The one record of the client leaving: `receive()`'s disconnect reads it too.
        self.departure = scope[DEPARTURE] = Departure(wire.watched)
        self._told = False  # the app has read the body's end
        self._until: asyncio.Future[None] | None = None
        self._held = b""  # the answer's head, until its first body bytes
        self._bodiless = scope["method"] == "HEAD"
        self._chunked = False
        self._left: int | None = None  # body bytes the answer's Content-Length still owes

    # The connection's side.
    def feed(self, data: bytes) -> None:
        """Body bytes came (one buffer, whatever the pieces)."""
        if not self.body:
            self.body = data
        else:
            if isinstance(self.body, bytes):
                self.body = bytearray(self.body)
            self.body += data
        self._wake()

    def end(self) -> None:
        """The request's body is whole."""
        self.more = False
        self._wake()

    @property
    def gone(self) -> bool:
        """The client has gone (`leave`)."""
        return self.departure.gone

    def leave(self) -> None:
        """The client has gone (or was refused) before this answer ended."""
        if self.gone or self.complete:
            return
        self.departure.leave()
        self._wake()

    def close_after(self) -> None:
        """The connection closes after this answer (its head says so if not yet made)."""
        self.keep_alive = False

    # The app's side.
    async def receive(self) -> Message:
        if self.expect:
            self.expect = False
            if not (self.started or self.gone):
                self.wire.transport.write(CONTINUE)
        while not (self.gone or self.complete):
            if self.body or (not self.more and not self._told):
                body, self.body = self.body, b""
                self._told = not self.more
                self.wire.taken()
                return {"type": "http.request", "body": bytes(body), "more_body": self.more}
            self.wire.watched()
            self._until = self.wire.loop.create_future()
            await self._until
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.wire.flow.write_paused and not self.gone:
            await self.wire.flow.drain()
        if self.gone:
            return
        if not self.started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"an answer begins with its start, not {message['type']}")
            if self.expect and self.more:
                # Answered before it asked for the body it was told to wait with: a client
                # that waits sends no body, one that stops waiting sends it, so what comes
                # next cannot be told apart from the next request (RFC 9110 10.1.1).
                self.keep_alive = False
            self.started, self.expect = True, False
            self._held = self._head(message["status"], message.get("headers", ()))
            self.wire.loop.call_soon(self._flush)
            return
        if self.complete or message["type"] != "http.response.body":
            raise RuntimeError(f"unexpected {message['type']} for an answer begun or ended")
        self._body(message.get("body", b""), message.get("more_body", False))

    async def run(self, app: App) -> None:
        """Serve the request with `app` (the exchange's task)."""
        try:
            await app(self.scope, self.receive, self.send)
        except asyncio.CancelledError:
            self.wire.transport.abort()  # cut at shutdown: no answer will end
            raise
        except Exception as exc:
            log.exception("listener.app_failed", path=self.scope["path"], error=type(exc).__name__)
        else:
            if not (self.complete or self.gone):
                why = "began no answer" if not self.started else "left its answer unfinished"
                log.error("listener.app_failed", path=self.scope["path"], error=why)
        if not (self.complete or self.gone):
            self._broken()

    # The answer.
    def _head(self, status: int, headers: Any) -> bytes:
        parts = [status_line(status), date_line()]
        length, chunked, said_close = None, False, False
        if self.keep_alive and not self.wire.keeps():
            self.keep_alive = False
        for name, value in headers:
            if not (_NAME.fullmatch(name) and _VALUE.fullmatch(value)):
                raise RuntimeError(f"an answer's header h11 would not write: {name!r}")
            low = name.lower()
            if low == b"content-length":
                if not value.isdigit():
                    raise RuntimeError(f"an answer's content-length h11 would not write: {value!r}")
                length = int(value)
            elif low == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif low == b"connection" and b"close" in value.lower():
                self.keep_alive, said_close = False, True
            parts += (name, b": ", value, b"\r\n")
        if self._bodiless or status in (204, 304) or status < 200:
            self._bodiless = True
        elif length is None and not chunked:
            if self.http10:
                self.keep_alive = False  # the close ends the body
            else:
                chunked = True
                parts.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive and not said_close:
            parts.append(b"connection: close\r\n")
        parts.append(b"\r\n")
        self._chunked, self._left = chunked, None if chunked or self._bodiless else length
        return b"".join(parts)

    def _body(self, body: bytes, more: bool) -> None:
        if self._bodiless:
            data = b""
        elif self._chunked:
            data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more:
                data += b"0\r\n\r\n"
        else:
            data = body
            if self._left is not None:
                if len(data) > self._left:  # longer than it said: cut, and the connection too
                    data, self.keep_alive = data[: self._left], False
                self._left -= len(data)
        if self._held:
            data, self._held = self._held + data, b""
        if data:
            self.wire.transport.write(data)
            self.written = True
        if not more:
            self.complete = True
            if self._left:  # shorter than it said: the client must not wait for the rest
                self.keep_alive = False
            self._wake()
            self.wire.answered(self)

    def _flush(self) -> None:
        if self._held and not self.gone:
            self.wire.transport.write(self._held)
            self.written = True
        self._held = b""

    def _broken(self) -> None:
        """The app ended without its whole answer: 500 if none was written, else the
        connection goes with the half answer."""
        self._held, self.complete = b"", True
        self._wake()
        if not self.written:
            self.wire.transport.write(server_error())
        self.wire.transport.close()

    def _wake(self) -> None:
        until, self._until = self._until, None
        if until is not None and not until.done():
            until.set_result(None)
