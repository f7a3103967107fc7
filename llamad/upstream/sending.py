"""What the upstream pool (`upstream_pool.py`) keeps: where each upstream is, its connections and
waiters, and each request on its way until its answer is awaited.
"""

from __future__ import annotations

import asyncio
from collections import deque
from functools import lru_cache
from urllib.parse import urlsplit

from llamad.upstream.connection import Connection

Key = tuple[str, int]


@lru_cache(maxsize=256)  # bounded: instances and peers are few, but addresses change
def where(base_url: str) -> tuple[Key, str, bytes]:
    """`base_url`'s (host, port), path prefix and Host header line, parsed once."""
    url = urlsplit(base_url)
    host = b"host: " + url.netloc.encode("latin-1") + b"\r\n"
    return (url.hostname or "127.0.0.1", url.port or 80), url.path.rstrip("/"), host


class Host:
    """The connections to one (host, port): how many are open, the idle ones among them,
    and the requests waiting for one, first come first served. A waiter is handed either
    a connection or, as None, the slot of one that closed."""

    def __init__(self) -> None:
        self.open = 0
        self.idle: list[Connection] = []
        self.waiters: deque[asyncio.Future[Connection | None]] = deque()

    def hand(self, item: Connection | None) -> bool:
        """Give `item` to the longest waiter, if one still waits."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return True
        return False


class Sending:
    """A request on its way (`Pool.start`): written already when a kept connection was
    free, else when `Pool.answer` gets one."""

    __slots__ = ("conn", "data", "key", "method")

    def __init__(self, key: Key, data: bytes, conn: Connection | None, method: str) -> None:
        self.key, self.data, self.conn, self.method = key, data, conn, method

    def take(self) -> Connection | None:
        """The connection it was written on, now the caller's to read from or close (so
        `abandon` leaves it be); None when it is still to be sent."""
        conn, self.conn = self.conn, None
        return conn

    def abandon(self) -> None:
        """Nobody will wait for its answer (`Pool.answer` never ran): the connection it
        was written on closes, so the server stops working on it."""
        conn, self.conn = self.conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
