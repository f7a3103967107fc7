"""One HTTP/1.1 connection to an instance or a fleet peer, carrying one request at a time.

An asyncio protocol that httptools (llhttp) reads answers with: the head is awaited, the
body queues up until the relay takes it, and reading pauses when the relay falls behind.
The connection alone owns that queue and its pace: its answer reads through `read`.
Interim answers (100 Continue, 103 Early Hints) are read past: the head awaited is the
final one. Trailers after a chunked body are read and dropped.

An upstream is not trusted (a fleet peer, or whatever answers its URL): what it sends
outside a body's data (a head, a chunk's size line and extensions, the trailers) is
counted against MAX_HEAD as the listener counts a request's (`common/framing.py`), and
a head once begun must end within HEAD_TIMEOUT_S. The time before
an answer's first byte is not bounded here: a whole completion's head comes only once
it has been generated.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import cast

import httptools

from llamad.common.deadline import Deadline
from llamad.common.framing import Framing

Headers = list[tuple[bytes, bytes]]

# An answer the client reads slower than the instance writes stops being read from the
# instance past this many buffered bytes, and starts again once the relay has taken them.
HIGH_WATER = 256 * 1024
# Bytes an answer may spend on anything but its body's data: its head, then its chunks'
# framing and trailers (nginx's proxy_buffer_size is 4 or 8 KiB). It also bounds what
# httptools joins piece by piece while a header line is unfinished. No count of lines:
# nginx and h11 have none for an answer, and the bytes bound them.
MAX_HEAD = 16 * 1024
# From an answer head's first byte to its end (llama-server writes a head at once).
HEAD_TIMEOUT_S = 5.0
TOO_BIG = "upstream sent too big header"


class Broken(ConnectionError):
    """The upstream connection failed or closed before its answer ended.

    Raised as such by `Answer.chunks()` (and what reads through it) when the answer had
    begun: its head, and maybe some of its body, may already have reached the client.
    """


class NotAnswered(Broken):
    """No answer head arrived: `Pool.request` returned nothing, so nobody has seen any of
    the answer and the caller may send the request again, to a restarted instance say.

    `sent` is False when the request never left (connection refused, connect timeout, no
    connection free within the connect timeout) and True when it was written but the
    connection broke, or answered something unreadable, before the answer's head. The
    relay raises it too, sent, for a whole answer that broke off before any of it went
    on to the client. The cause (ConnectionRefusedError, TimeoutError, ...) is chained
    as `__cause__`.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Connection(asyncio.Protocol):
    """One connection and the answer it is reading."""

    def __init__(self, key: tuple[str, int], head_timeout_s: float = HEAD_TIMEOUT_S) -> None:
        self.key = key
        self._head_timeout_s = head_timeout_s
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.lost = False
        self.reused = False
        # Its keep-alive while it waits in the pool: the pool sets and clears it.
        self.expiry = Deadline(asyncio.get_running_loop(), self._expire)
        self._head_due = Deadline(asyncio.get_running_loop(), self._head_late)
        # Told once when the connection has closed, so its pool can count it out.
        self.on_lost: Callable[[Connection], None] | None = None
        self.begin()

    def begin(self) -> None:
        """Ready for the next request's answer."""
        self.head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.headers: Headers = []
        self.status = 0
        self._body: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = self.done = self.until_close = self.got_bytes = self.keep_alive = False
        self.overrun = self.interim = self._head_begun = False
        self._framing = Framing(MAX_HEAD, max_lines=None)
        self._waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods, not its class.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        if not self._head_begun:
            self._head_begun = True
            self._head_due.set(self._head_timeout_s)
        self._framing.fed(len(data))
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"unreadable answer: {exc}")
        if self._framing.over:
            # Counted after the parser saw it: a read holding a small head and a large
            # body is fine, and what piles up unparsed stays within one read of the bound.
            self._fail(TOO_BIG)
        if self.overrun and self.transport is not None:
            # Bytes after the answer ended, which nobody asked for, would be read as the
            # next request's answer: the connection is not used again.
            self.lost = True
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._head_due.cancel()
        if self.head.done() and self.until_close:
            self.done = True  # an answer without a length ends with its connection
            self._wake()
        else:
            self._fail(str(exc) if exc else "the connection was closed")
        if self.on_lost is not None:
            on_lost, self.on_lost = self.on_lost, None
            on_lost(self)

    # httptools callbacks; after the answer has ended they only note the overrun.
    def on_message_begin(self) -> None:
        self.overrun = self.done
        self._framing.begin()

    def on_status(self, status: bytes) -> None:
        if not self._framing.counted(len(status)):
            self._fail(TOO_BIG)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._framing.line(len(name) + len(value) + 4):
            self._fail(TOO_BIG)  # a head, or trailers, that came whole in one read
        # Once the head is in, what comes is a chunked body's trailers: not the head's.
        if not (self.overrun or self.head.done()):
            # llhttp leaves a value's trailing white space, which RFC 9112 5 leaves out
            # (and the listener would refuse to write on).
            self.headers.append((name, value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        if self.overrun:
            return
        self._framing.body_begins()
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            if status == 101:  # nothing here asks for an upgrade
                self._fail("the upstream switched protocols unasked")
                return
            self.interim = True  # its message ends here; the final answer follows
            self._head_begun = False  # the final head's deadline starts at its first byte
            self._head_due.clear()
            return
        self._head_due.clear()
        # Kept here: the parser's own is the next message's once bytes follow this one.
        self.status = status
        names = {k.lower() for k, _ in self.headers}
        if b"transfer-encoding" in names and not _chunked_only(self.headers):
            # llhttp reads `gzip, chunked` as chunked and `gzip` to the close; nginx and
            # h11 refuse both, and so does this (a body the relay could not frame).
            self._fail("upstream sent unknown transfer-encoding")
            return
        self.until_close = not ({b"content-length", b"transfer-encoding"} & names) and not (
            status < 200 or status in (204, 304)
        )
        if not self.head.done():
            self.head.set_result(None)

    def on_chunk_header(self) -> None:
        self._framing.chunk()

    def on_body(self, body: bytes) -> None:
        self._framing.data(len(body))
        if self.overrun or not body:  # an empty read would end the reader's body early
            return
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._framing.body_begins()  # what follows (nobody's answer) gets its own allowance
        if self.overrun:
            return
        if self.interim:
            self.interim = False
            self.headers = []
            return
        # Asked here: llhttp forgets the answer's Connection header once it has ended.
        self.keep_alive = self.parser.should_keep_alive()
        self.done = True
        self._wake()

    # The answer's body, as its reader takes it -----------------------------------------

    async def read(self) -> bytes:
        """The body that has arrived since the last read, waiting for some when none has;
        b"" once the body has ended. Raises Broken when the connection closed first."""
        while not self._body:
            if self.done:
                return b""
            await self._more()
        data = b"".join(self._body)
        self._body.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False  # taken: the instance may write on
            self.transport.resume_reading()
        return data

    async def arrived(self) -> None:
        """Wait until the whole body is in, taking none of it (it stays for `read`). Only
        for a body under HIGH_WATER: past it, reading pauses until the body is taken."""
        while not self.done:
            await self._more()

    @property
    def ended(self) -> bool:
        """The whole body has arrived and been read."""
        return self.done and not self._body

    @property
    def buffered(self) -> int:
        """Bytes of the body arrived and not yet read."""
        return self._buffered

    @property
    def paused(self) -> bool:
        """Reading waits for the reader to take what is buffered."""
        return self._paused

    async def _more(self) -> None:
        if self.lost:
            raise Broken("the connection was closed mid-answer")
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    def _head_late(self) -> None:
        self._fail(f"the answer's head did not end within {self._head_timeout_s:g} s")

    def _expire(self) -> None:
        if self.transport is not None:
            self.transport.close()  # connection_lost tells the pool

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, why: str) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()
        if not self.head.done():
            self.head.set_exception(NotAnswered(why, sent=True))
        elif self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(Broken(why))


def _chunked_only(headers: Headers) -> bool:
    """The head's transfer codings are `chunked` alone (one field, one coding)."""
    codings = [v for k, v in headers if k.lower() == b"transfer-encoding"]
    return len(codings) == 1 and codings[0].strip().lower() == b"chunked"
