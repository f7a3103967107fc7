"""One connection's requests, in order: read, bounded and timed, answered one by one.

A head is read (`idle` -> `head`), then its body (`body`); once the body is whole the
connection `waits` while an answer is owed, and is `idle` after. The head's deadline
runs from the connection or the last answer, the body's from the head's first byte; an
idle connection is closed at its deadline, one being answered has none (a log follower,
a stream). Pipelined requests are queued, each started once the one before is answered.
A refused request (431, 413, 408, or 400 for what the parser will not read) is answered
in the API family's shape after the answers owed before it; what the client still sends
is then drained for a moment, so that it reads the answer rather than a reset.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from llamad.common.hosts import client_key
from llamad.listener.answers import refusal
from llamad.listener.exchange import App, Exchange
from llamad.listener.flow import Flow
from llamad.listener.limits import Limits, Refusal, Refused, Shape, body_too_large, late
from llamad.listener.reader import Head, Reader
from llamad.listener.table import TRUST, ConnTable

# How long a refused client may go on sending (and we discarding) before the reset.
LINGER_S = 5.0
# Body bytes held for an app that has not taken them, and requests queued behind the one
# being answered, before reading pauses.
HIGH_WATER = 64 * 1024
MAX_QUEUED = 8


class Site(Protocol):
    """What a connection needs of its listener (`server.Listener`)."""

    app: App
    limits: Callable[[], Limits]  # read per connection and per request (reloads)
    shape: Shape
    table: ConnTable
    refused: Refused
    closing: bool
    draining: Callable[[], bool]  # answers close their connections (a shutdown's delay)

    def accepts(self, transport: Any) -> bool: ...
    def start(self, exchange: Exchange) -> None: ...
    def opened(self, conn: Any) -> None: ...
    def lost(self, conn: Any) -> None: ...


class Pipeline:
    """The requests of one connection (see the module's docstring)."""

    def __init__(
        self, site: Site, transport: asyncio.Transport, flow: Flow, scope: dict[str, Any],
        key: str | None, limits: Limits,
    ) -> None:  # fmt: skip
        """`scope`: what every request's ASGI scope starts from (client, server, scheme);
        `key`: the share it counts for (`table.py`)."""
        self.site, self.transport, self.flow = site, transport, flow
        self._scope = {**scope, TRUST: self.vouched}
        self.loop = asyncio.get_running_loop()
        self.key, self.limits = key, limits
        # Until a head is whole the connection may go for room (`table.py`); None: a
        # request is under way.
        self.idle_since: float | None = self.loop.time()
        self.trusted = False  # a key vouched for it (`table.trust`)
        self.surplus = False  # its key was past its share (`table.py`)
        self.reader = Reader(self)
        self.phase = "idle"
        self.pending: deque[Exchange] = deque()  # answers owed, in order
        self.reading: Exchange | None = None  # the request whose body is being read
        self.done = False  # refused or upgraded: no request follows
        self._size, self._began = 0, 0.0  # body bytes of `reading`; when its head began
        self._final: bytes | None = None  # the last answer, once those owed before it are

    def evict(self) -> None:
        """Closed to make room (`table.py`): it was idle, its head still coming, or
        surplus to its key's share."""
        self.transport.abort()

    def vouched(self, who: str) -> None:
        """A request on it was let in with key `who` (`table.trust`)."""
        self.site.table.vouch(self, who, self.limits)

    # The reader's side (`reader.Requests`).
    def begin(self) -> None:
        self.limits = self.site.limits()
        self.phase, self._began = "head", self.loop.time()
        if not self.flow.armed:
            self.flow.arm(self.limits.head_timeout)  # pipelined behind an answer: from now

    def head(self, head: Head) -> None:
        cap = self.limits.max_body
        if cap is not None and head.length > cap:
            raise body_too_large(cap)
        self._size = 0
        self._waiting(None)
        scope = {
            **self._scope, "method": head.method, "http_version": head.version,
            "path": head.path, "raw_path": head.raw_path, "query_string": head.query,
            "headers": head.headers,
        }  # fmt: skip
        keep = head.keep_alive and head.version == "1.1" and not self.site.closing
        exchange = self.reading = Exchange(self, scope, keep, head.expect_continue)
        self.phase = "body"
        self.flow.arm(max(self._began + self.limits.request_timeout - self.loop.time(), 0.0))
        self.pending.append(exchange)
        if len(self.pending) == 1:
            self.site.start(exchange)
        elif len(self.pending) > MAX_QUEUED:
            self.flow.pause()

    def body(self, data: bytes) -> None:
        exchange = self.reading
        assert exchange is not None
        self._size += len(data)
        cap = self.limits.max_body
        if cap is not None and self._size > cap:
            raise body_too_large(cap)
        if not exchange.complete:  # else answered already: the rest is dropped
            exchange.feed(data)
            if len(exchange.body) > HIGH_WATER:
                self.flow.pause()

    def end(self) -> None:
        exchange, self.reading = self.reading, None
        assert exchange is not None
        exchange.end()
        if self.pending:
            self.phase = "waiting"
            self.flow.disarm()
        else:
            self._idle()  # answered before its body ended

    # The exchanges' side (`exchange.Wire`).
    def taken(self) -> None:
        reading = self.reading
        if len(self.pending) <= MAX_QUEUED and (reading is None or len(reading.body) <= HIGH_WATER):
            self.flow.resume()

    def watched(self) -> None:
        self.flow.resume()

    def keeps(self) -> bool:
        # While the listener drains, the connection closes after the answer going now,
        # unless requests wait behind it: they were sent here and are served here.
        return len(self.pending) > 1 or not self.site.draining()

    def answered(self, exchange: Exchange) -> None:
        if self.pending and self.pending[0] is exchange:
            self.pending.popleft()
        if not exchange.keep_alive:
            self.transport.close()
        elif self.pending:
            self.site.start(self.pending[0])
        elif self._final is not None:
            self._say_final()
        elif exchange is self.reading:
            # Answered (a 401, say) with its body still to come: the body is dropped as
            # it comes; one that stops coming holds no place past a moment.
            left = self._began + self.limits.request_timeout - self.loop.time()
            self.flow.arm(max(min(left, LINGER_S), 0.0))
        elif self.phase == "waiting":
            self._idle()
        self.taken()

    # Endings.
    def refuse(self, why: Refusal) -> None:
        """Refuse the request being read: counted, logged, answered in the family's shape."""
        client = self._scope["client"]
        self.site.refused(why.reason, client_key(client[0]) if client else None)
        body = self.site.shape(self.reader.path(), why.status, why.reason, why.message)
        self.stop(refusal(why.status, body))

    def stop(self, answer: bytes) -> None:
        """No more requests: `answer` for the one being read, unless its own has begun."""
        exchange, self.reading = self.reading, None
        if exchange is not None:
            # The app sees its client gone: its reads end and its writes go nowhere.
            exchange.leave()
            if not (exchange.written or exchange.complete):
                self.pending.remove(exchange)
            elif answer:  # its own answer has begun: ours comes too late
                self.transport.abort()
                return
        self.done, self._final = True, answer
        self.flow.disarm()
        if not self.pending:
            self._say_final()

    def close_after_last(self) -> None:
        """No request follows (an upgrade asked for): close after the
        answers owed."""
        self.done = True
        if self.pending:
            self.pending[-1].close_after()
        else:
            self.transport.close()

    def shutdown(self) -> None:
        """The listener stops: an idle or refused connection closes now, a busy one after
        the answer it is writing."""
        if self._final is not None:
            self.transport.abort()
        elif not self.pending:
            self.transport.close()
        else:
            self.pending[0].close_after()

    def lost(self) -> None:
        """The connection closed: every answer still owed is owed to no one."""
        for exchange in self.pending:
            exchange.leave()
        self.pending.clear()

    def release(self) -> None:
        """The connection closed and is forgotten: the references that would make its
        objects a cycle (its reader's, its scope's hook, a request being read) go, so
        that they are freed at once. A neighbour churning thousands of connections a
        second otherwise left tens of MB to the next full collection."""
        self.lost()
        self.reader.release()
        self.reading = None
        self._scope.pop(TRUST, None)

    def due(self) -> None:
        """The deadline passed."""
        if self._final is not None or self.phase == "idle":
            self.transport.abort()  # nothing asked for: no answer owed
        elif self.phase == "body" and self.reading is not None and self.reading.complete:
            self.stop(b"")  # answered, and the rest of its body stopped coming
        elif self.phase in ("head", "body"):
            self.refuse(late(self.limits, self.phase == "body"))

    def _say_final(self) -> None:
        self.transport.write(self._final or b"")
        self._waiting(0.0)  # the first to go for room
        self.flow.resume()
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the client reads our answer, then EOF
        self.flow.arm(LINGER_S)

    def _idle(self) -> None:
        # Kept alive: the next request head must come within the deadline as well.
        self.phase = "idle"
        self._waiting(self.loop.time())
        self.flow.arm(self.limits.head_timeout)

    def _waiting(self, since: float | None) -> None:
        """Waiting for a head since `since` (None: serving one), as its table knows."""
        self.idle_since = since
        self.site.table.moved(self)
