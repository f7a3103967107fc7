"""A guarded listener: bounded connections, request heads, bodies and time, before any app.

uvicorn bounds none of these: its httptools protocol keeps a head however long it grows
(one connection streaming header lines grows the daemon without end), and holds a
connection that never sends its request or body for ever. This subclass, on every listener, answers
431 for a head past `max_head` bytes or `max_headers` lines, 408 for a head or body late
(an idle connection just closes), 413 for a body over `max_body` (by Content-Length before
a byte is read, or as a chunked body grows), and keeps connections to the cap and each
address to its share (`conntable.py`). A refusal is answered in the API family's shape,
and what the client still sends is drained for a moment, so it reads the answer rather
than a reset.

h11, uvicorn's other parser, bounds a head's bytes (`h11_max_incomplete_event_size`) but
not its lines, bodies or time, and is the slower parser; counting in llhttp's callbacks
keeps the fast parser and one place for every limit.
"""

from __future__ import annotations

import asyncio
import functools
import http
import weakref
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from llamad.api.conntable import ConnTable
from llamad.common.deadline import Deadline
from llamad.common.departure import DEPARTURE, Departure
from llamad.common.limits import (
    Limits,
    Refusal,
    Refusals,
    Refused,
    Shape,
    answer,
    body_too_large,
    client_key,
    content_length,
    control_shape,
    head_too_large,
    is_loopback,
)

# uvicorn on httptools (llhttp, Node's parser) for every listener: its pure-Python h11
# costs the gateway CPU on every relayed request.
HttpProtocol = HttpToolsProtocol
# How long a refused client may go on sending (and we discarding) before the reset.
LINGER_S = 5.0


def guarded_protocol(
    base: type[HttpProtocol],
    cap: int,
    limits: Callable[[], Limits] = Limits,
    shape: Shape = control_shape,
    refused: Refused | None = None,
) -> type[HttpProtocol]:
    """A subclass of `base` for `uvicorn.Config(http=...)` holding `limits()` (read per
    connection and per request, so a reload applies) and at most `cap` connections. Each
    request's scope carries a `Departure` (common/departure.py) told when its client
    goes, so the app needs no task reading `receive()` for the disconnect."""
    table = ConnTable(cap, refused or Refusals("control"))

    class GuardedProtocol(base):  # type: ignore[misc,valid-type]
        key: str | None = None
        idle_since: float | None = None
        _timer: Deadline
        _phase = "idle"  # idle -> head -> body -> serving -> idle
        _lingering = False
        _limits = Limits()
        _began = 0.0
        _departure: Departure | None = None  # the latest request's, as uvicorn's `cycle`
        _raw = 0  # bytes received since the head began (an upper bound on its size)
        _head = _lines = _body = 0  # exact, counted in the parser's callbacks

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Through a weak reference: however a loop keeps a cancelled timer's
            # callback, a closed connection's objects never wait for the timer's time.
            self._timer = Deadline(self.loop, functools.partial(_fire, weakref.ref(self)))

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if transport.is_closing():  # refused by the base (another user)
                return
            self._limits = limits()
            host = self.client[0] if self.client else None
            self.key, self.idle_since = client_key(host), self.loop.time()
            trusted = self._limits.trust_loopback and is_loopback(host)
            if not table.admit(self, self._limits, trusted):
                transport.abort()
                return
            self._arm(self._limits.head_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            table.remove(self)
            self._timer.cancel()
            super().connection_lost(exc)
            if self.cycle is not None and self.cycle.disconnected:
                self._left()

        def evict(self) -> None:
            """Closed to make room: it was idle, waiting for a request."""
            self.transport.abort()

        def data_received(self, data: bytes) -> None:
            if self._lingering:
                return  # refused: what the client still sends is dropped unread
            if self._phase in ("idle", "head"):
                self._raw += len(data)
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserCallbackError as exc:
                if isinstance(exc.__context__, Refusal):
                    self._refuse(exc.__context__)
                else:
                    self._invalid()
                return
            except httptools.HttpParserError:
                self._invalid()
                return
            except httptools.HttpParserUpgrade:
                return  # no websockets here: the request was answered as a plain one
            if self._phase in ("idle", "head") and self._raw > self._limits.max_head:
                self._refuse(head_too_large(self._limits))

        # llhttp's callbacks, counting as they go.
        def on_message_begin(self) -> None:
            super().on_message_begin()
            # The head's deadline runs from the connection or the last answer (armed
            # then); the whole request's, from here.
            self._limits = limits()
            self._phase, self._began, self.idle_since = "head", self.loop.time(), None
            self._head = self._lines = self._body = 0

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._lines += 1
            self._count(len(name) + len(value) + 4)
            if self._phase == "body":
                # A chunked body's trailer. uvicorn appends it to the headers the app
                # already holds, so the relay sent it upstream as a header: dropped.
                return
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._head_ended()
            self._start_app()

        def _head_ended(self) -> None:
            cap = self._limits.max_body
            if cap is not None and content_length(self.headers) > cap:
                raise body_too_large(cap)
            self._phase = "body"
            left = self._began + self._limits.request_timeout - self.loop.time()
            self._arm(max(left, 0.0))

        def _start_app(self) -> None:
            # Told when the client goes (client_side.guard), where uvicorn marks its cycle.
            self._departure = self.scope[DEPARTURE] = Departure(self.flow.resume_reading)
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            self._count_body(body)
            super().on_body(body)

        def _count_body(self, body: bytes) -> None:
            self._body += len(body)
            cap = self._limits.max_body
            if cap is not None and self._body > cap:
                raise body_too_large(cap)

        def _replay(self, body: bytes) -> None:
            """Give the app a request read whole past it (`api/lane.py` gave it back),
            as if its head had just ended and its body come."""
            self._start_app()
            if body:
                super().on_body(body)
            self.on_message_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            if self.cycle is not None and self.cycle.response_complete:
                # Answered before its body ended: the rest was dropped unread and the
                # answer did not say close, so the connection stays for the next request.
                self._raw = 0
                self._idle()
            else:
                self._body_ended()

        def _body_ended(self) -> None:
            # Received whole: serving it may take hours (a log follower, a stream).
            self._raw = 0
            self._phase = "serving"
            self._disarm()

        def on_response_complete(self) -> None:
            queued = bool(self.pipeline)
            super().on_response_complete()
            if self._phase == "serving" and not queued:
                self._idle()
            elif self._phase == "body" and not queued and not self.transport.is_closing():
                # Answered (a 401, say) with its body still to come: the body is dropped
                # as it comes; one that stops coming holds no place past a moment.
                self._unset_keepalive_if_required()
                left = self._began + self._limits.request_timeout - self.loop.time()
                self._arm(max(min(left, LINGER_S), 0.0))

        def _idle(self) -> None:
            # Kept alive: the next request head must come within the deadline as well.
            self._phase, self.idle_since = "idle", self.loop.time()
            self._arm(self._limits.head_timeout)

        def _invalid(self) -> None:
            # As uvicorn says it: one line per kind in the log (daemon/logs.py).
            message = "Invalid HTTP request received."
            self.logger.warning(message)
            self.send_400_response(message)

        def _count(self, size: int) -> None:
            self._head += size
            if self._head > self._limits.max_head or self._lines > self._limits.max_headers:
                raise head_too_large(self._limits)

        def _arm(self, delay: float) -> None:
            self._timer.set(delay)

        def _disarm(self) -> None:
            self._timer.clear()

        def _deadline(self) -> None:
            if self._lingering or self._phase == "idle":
                self.transport.abort()  # nothing asked for: no answer owed
            elif self._phase == "body" and self.cycle is not None and self.cycle.response_complete:
                self._linger()  # answered, and the rest of its body stopped coming: EOF
            elif self._phase in ("head", "body"):
                took = self._limits.request_timeout if self._phase == "body" else None
                what = f"within {took:g}s" if took else "in time"
                self._refuse(Refusal(408, "deadline", f"the request did not arrive {what}"))

        def _refuse(self, why: Refusal) -> None:
            table.refused(why.reason, self.key)
            cycle = self.cycle if self._phase != "head" else None  # None: no app runs yet
            if cycle is not None:
                # The app sees a client gone: its reads end and its writes go nowhere.
                cycle.disconnected = True
                cycle.message_event.set()
                self._left()
                if cycle.response_started:  # answered already, or too late for ours
                    self.transport.abort()
                    return
            phrase = http.HTTPStatus(why.status).phrase
            body = shape(self._path(), why.status, why.reason, why.message)
            self.transport.write(answer(why.status, phrase, body))
            self._linger()

        def _linger(self) -> None:
            self._lingering, self.idle_since = True, 0.0  # the first to go for room
            self.flow.resume_reading()
            if self.transport.can_write_eof():
                self.transport.write_eof()  # the client reads our answer, then EOF
            self._arm(LINGER_S)

        def _left(self) -> None:
            if self._departure is not None:
                self._departure.leave()

        def _path(self) -> str:
            raw = self.url if isinstance(getattr(self, "url", None), bytes) else b""
            return raw.split(b"?", 1)[0].decode("latin-1")

    return GuardedProtocol


def _fire(ref: weakref.ref[Any]) -> None:
    conn = ref()
    if conn is not None:
        conn._deadline()
