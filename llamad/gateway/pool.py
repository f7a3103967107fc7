"""Kept-alive HTTP/1.1 connections to instances and fleet peers, for the relay.

asyncio transports with httptools (llhttp, the parser uvicorn serves with) reading the
answers. The relay needs a small part of HTTP: one request written whole with its
Content-Length, an answer streamed back as it arrives, a connection reused when the answer
ended cleanly and dropped otherwise. Doing only that costs less than half the CPU per
request of aiohttp's client (bench/machinery: about 100 us against 250), and took about
0.3 ms off the gateway's added latency.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from llamad.gateway.connection import Broken, Connection, Headers

# Below the 5 s keep-alive of llama-server (cpp-httplib's default) and of uvicorn (a
# fleet peer's gateway), so a pooled connection is not reused just as the server closes it.
KEEPALIVE_S = 4.0
CONNECT_TIMEOUT_S = 10.0


class Answer:
    """An upstream answer: status and headers now, the body as it arrives."""

    def __init__(self, conn: Connection, pool: Pool, head_only: bool) -> None:
        self._conn, self._pool = conn, pool
        self.status = conn.parser.get_status_code()
        self.headers = conn.headers
        self._head_only = head_only

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, in pieces as large as what has arrived since the last one."""
        c = self._conn
        while not self._head_only:
            if c.body:
                data = b"".join(c.body)
                c.body.clear()
                c.buffered = 0
                if c.paused and c.transport is not None:
                    c.paused = False
                    c.transport.resume_reading()
                yield data
            elif c.done:
                return
            elif c.lost:
                raise Broken("the connection was closed mid-answer")
            else:
                c.waiter = asyncio.get_running_loop().create_future()
                await c.waiter

    @property
    def complete(self) -> bool:
        """The whole body has arrived."""
        return self._conn.done and not self._conn.body

    def close(self) -> None:
        """Give the connection back when the answer ended cleanly; drop it otherwise, so
        an instance that is still writing (the client left) stops generating."""
        c = self._conn
        # An answer that ends with its connection (no length) is never keep-alive.
        if self.complete and c.keep_alive and not (c.lost or self._head_only):
            self._pool.put(c)
        elif c.transport is not None:
            c.transport.close()


class Pool:
    """Kept-alive connections per (host, port), as many as concurrent requests need."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[Connection]] = {}

    async def request(
        self, method: str, base_url: str, target: str, headers: Headers, body: bytes | None
    ) -> Answer:
        """Send one request to `base_url` + `target` and wait for the answer's head."""
        url = urlsplit(base_url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        head = [f"{method} {url.path.rstrip('/')}{target} HTTP/1.1\r\n".encode("latin-1")]
        head += [b"host: ", url.netloc.encode("latin-1"), b"\r\n"]
        for k, v in headers:
            head += [k, b": ", v, b"\r\n"]
        if body is not None:
            head.append(b"content-length: %d\r\n" % len(body))
        data = b"".join([*head, b"\r\n", body or b""])
        while True:
            conn = await self._get((host, port))
            assert conn.transport is not None
            conn.transport.write(data)
            try:
                await conn.head
            except Broken:
                # A kept-alive connection the server closed as we reused it never saw the
                # request: send it again on a new one.
                if conn.reused and not conn.got_bytes:
                    continue
                raise
            except BaseException:
                conn.transport.close()
                raise
            return Answer(conn, self, head_only=method == "HEAD")

    async def _get(self, key: tuple[str, int]) -> Connection:
        idle = self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if conn.expiry is not None:
                conn.expiry.cancel()
            if not conn.lost:
                conn.reused = True
                conn.begin()
                return conn
        loop = asyncio.get_running_loop()
        connect = loop.create_connection(lambda: Connection(key), *key)
        _, conn = await asyncio.wait_for(connect, CONNECT_TIMEOUT_S)
        return conn

    def put(self, conn: Connection) -> None:
        """Keep `conn` for the next request to its host, for KEEPALIVE_S at most."""
        self._idle.setdefault(conn.key, []).append(conn)
        conn.expiry = asyncio.get_running_loop().call_later(KEEPALIVE_S, self._expire, conn)

    def _expire(self, conn: Connection) -> None:
        idle = self._idle.get(conn.key, [])
        if conn in idle:
            idle.remove(conn)
        if conn.transport is not None:
            conn.transport.close()

    async def close(self) -> None:
        """Close every idle connection (a busy one closes with its answer)."""
        for idle in self._idle.values():
            for conn in idle:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
