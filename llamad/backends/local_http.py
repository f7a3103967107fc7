"""The daemon's one HTTP client for its own children: probes and metrics scrapes.

HTTP/1.1 on asyncio, read with httptools (llhttp, which the gateway reads answers with),
over connections kept alive per server and shared by every probe. A probe is a small GET
on this host: httpx's pool cost several times its CPU, and loading httpcore imports
every async library and HTTP/2 stack installed beside it (trio, h2), megabytes an idle
daemon kept and a pause of the loop at the first probe.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import urlsplit

import httptools

from llamad.common.framing import Framing

# Head fields whose presence says where a body ends; without them, at the close.
_FRAMING = (b"content-length", b"transfer-encoding")
# A whole answer is held in memory: the largest a child gives (`/metrics`, `/slots` of
# many slots) is far below this.
MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Reply:
    """A whole answer."""

    status: int
    body: bytes


@lru_cache(maxsize=1024)
def _target(url: str) -> tuple[str, int, bytes]:
    """(host, port, the request's first two head lines) of an `http://` URL."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return host, port, f"{path} HTTP/1.1\r\nHost: {netloc}\r\n".encode()


class _Exchange(asyncio.Protocol):
    """One connection, reading the answer to the request it carries."""

    def __init__(self, idle: list[_Exchange]) -> None:
        self.idle = idle  # its server's kept connections, which it leaves when it closes
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.lost = False
        self.answer: asyncio.Future[Reply] | None = None
        self.got_bytes = self.keep_alive = False
        self.status = 0
        self.framed = False
        self.body: list[bytes] = []
        self.size = 0  # of the body so far
        # The head, and a chunked body's framing, bounded as a request's are.
        self.framing = Framing()

    def send(self, data: bytes) -> asyncio.Future[Reply]:
        """Write one request; the future is its whole answer."""
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.got_bytes = self.keep_alive = self.framed = False
        self.status, self.body, self.size = 0, [], 0
        self.framing.begin()
        self.transport.write(data)
        return self.answer

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods, not its class.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        self.framing.fed(len(data))
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"unreadable answer: {exc}"))
        if self.framing.over or self.size > MAX_BODY:
            self._fail(ConnectionError("answer past its limits: too big a head or body"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self in self.idle:
            self.idle.remove(self)
        if self.status and not self.framed and self.status not in (204, 304):
            self._end()  # an answer without a length ends with its connection
        else:
            self._fail(exc or ConnectionResetError("the connection was closed"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.framing.line(len(name) + len(value) + 4):
            raise ValueError("too many header lines")  # llhttp stops: an unreadable answer
        self.framed = self.framed or name.lower() in _FRAMING

    def on_headers_complete(self) -> None:
        self.framing.body_begins()
        status = self.parser.get_status_code()
        self.status = 0 if 100 <= status < 200 else status  # an interim head: read past it

    def on_chunk_header(self) -> None:
        self.framing.chunk()

    def on_body(self, body: bytes) -> None:
        self.framing.data(len(body))
        self.size += len(body)
        if self.size <= MAX_BODY:
            self.body.append(body)

    def on_message_complete(self) -> None:
        self.framing.body_begins()
        if self.status:
            # Asked here: llhttp forgets the answer's Connection header once it has ended.
            self.keep_alive = self.parser.should_keep_alive()
            self._end()

    def _end(self) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_result(Reply(self.status, b"".join(self.body)))

    def _fail(self, exc: Exception) -> None:
        self.close()
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)


class Client:
    """Requests to the daemon's children; each waits for its whole answer.

    Errors are OSErrors: ConnectionRefusedError, ConnectionError for a connection closed
    or an unreadable answer, TimeoutError past `timeout` (connect, write and read alike).
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Exchange]] = {}

    async def request(
        self,
        method: str,
        url: str,
        timeout: float,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request and its whole answer (a `body` goes as JSON)."""
        host, port, target = _target(url)
        fields = dict(headers or {})
        if body is not None:
            fields |= {"Content-Type": "application/json", "Content-Length": str(len(body))}
        head = b"".join((method.encode(), b" ", target, *_lines(fields), b"\r\n"))
        data = head + body if body is not None else head
        idle = self._idle.setdefault((host, port), [])
        async with asyncio.timeout(timeout):
            conn = idle.pop() if idle else None
            if conn is not None:
                try:
                    return await self._exchange(conn, data, idle)
                except ConnectionError:
                    if conn.got_bytes:
                        raise
                    # A kept connection the server closed as this request went: once more.
            loop = asyncio.get_running_loop()
            _, fresh = await loop.create_connection(lambda: _Exchange(idle), host, port)
            return await self._exchange(fresh, data, idle)

    @staticmethod
    async def _exchange(conn: _Exchange, data: bytes, idle: list[_Exchange]) -> Reply:
        try:
            reply = await conn.send(data)
        except BaseException:
            conn.close()  # cancelled or failed mid-answer: never reused
            raise
        if conn.keep_alive and not conn.lost:
            idle.append(conn)
        else:
            conn.close()
        return reply

    def close(self) -> None:
        """Close every kept connection."""
        for idle in self._idle.values():
            for conn in list(idle):
                conn.close()
        self._idle.clear()


def _lines(fields: dict[str, str]) -> list[bytes]:
    return [f"{k}: {v}\r\n".encode() for k, v in fields.items()]
