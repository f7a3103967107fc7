"""Kept-alive HTTP/1.1 connections to instances and fleet peers: every request the
gateway sends them, the relay's and the Ollama translation's.

asyncio transports with httptools (llhttp, the parser the listeners read with) reading the
answers. The gateway needs a small part of HTTP: one request written whole with its
Content-Length, an answer streamed back as it arrives, a connection reused when the answer
ended cleanly and dropped otherwise. Doing only that costs less than half the CPU per
request of aiohttp's client (bench/machinery).

What a failure means to the caller (see `NotAnswered`): `request` raises `NotAnswered`
when no answer head arrived, and nothing else of OSError's kind; reading an answer raises
`Broken` when it breaks off. A request is written once, except on a kept connection that
closed as we reused it without a byte in answer: the server never read it (or, at worst,
died reading it), so it goes again on a new connection. A fresh connection's request is
never written again here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from llamad.upstream.answer import Answer
from llamad.upstream.connection import HEAD_TIMEOUT_S, Connection, Headers, NotAnswered
from llamad.upstream.sending import Host, Key, Sending, where
from llamad.upstream.sockets import readable, self_connected, set_keepalive

# Below the 5 s keep-alive of llama-server (cpp-httplib's default) and of a fleet peer's
# gateway (its idle deadline), so a pooled connection is not reused just as it is closed.
KEEPALIVE_S = 4.0
# Waiting for a connection to come free and connecting share this bound.
CONNECT_TIMEOUT_S = 10.0
# Far above the parallel slots of one llama-server: past it requests queue in the server
# anyway, so the cap only stops a flood from spending the gateway's file descriptors.
MAX_PER_UPSTREAM = 64


def encode(headers: Mapping[str, str]) -> Headers:
    """Headers as `request` takes them."""
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class Pool:
    """Kept-alive connections per (host, port), at most `max_per_upstream` open to each:
    a request past that waits, first come first served, for one to come back or close."""

    def __init__(
        self, max_per_upstream: int = MAX_PER_UPSTREAM, head_timeout_s: float = HEAD_TIMEOUT_S
    ) -> None:
        self.max_per_upstream = max_per_upstream
        self.head_timeout_s = head_timeout_s  # from an answer head's first byte to its end
        self._hosts: dict[Key, Host] = {}

    async def request(
        self, method: str, base_url: str, target: str, headers: Headers, body: bytes | None
    ) -> Answer:
        """Send one request to `base_url` + `target` and wait for the answer's final head.

        Raises NotAnswered when none came: see the module's docstring."""
        return await self.answer(self.start(method, base_url, target, headers, body))

    def start(
        self, method: str, base_url: str, target: str, headers: Headers, body: bytes | None
    ) -> Sending:
        """The request, written at once when a kept connection is free; `answer` waits
        for its answer (and sends it first if no connection was free)."""
        key, prefix, host = where(base_url)
        head = [f"{method} {prefix}{target} HTTP/1.1\r\n".encode("latin-1"), host]
        for k, v in headers:
            head += [k, b": ", v, b"\r\n"]
        if body is not None:
            head.append(b"content-length: %d\r\n" % len(body))
        data = b"".join([*head, b"\r\n", body or b""])
        sending = Sending(key, data, self._idle(self._host(key)), method)
        if sending.conn is not None and sending.conn.transport is not None:
            sending.conn.transport.write(data)
        return sending

    async def answer(self, sending: Sending) -> Answer:
        """The answer's final head to `sending`. Raises NotAnswered when none came."""
        while True:
            conn = sending.take()
            if conn is None:
                conn = await self._get(sending.key)
                assert conn.transport is not None
                conn.transport.write(sending.data)
            try:
                await conn.head
            except NotAnswered:
                if conn.reused and not conn.got_bytes:
                    continue  # a kept connection the server closed as we reused it
                raise
            except BaseException:
                assert conn.transport is not None
                conn.transport.close()
                raise
            return Answer(conn, self.put, head_only=sending.method == "HEAD")

    def counts(self) -> dict[Key, tuple[int, int]]:
        """Per upstream: the connections open, and how many of them are idle."""
        return {key: (h.open, len(h.idle)) for key, h in self._hosts.items()}

    async def _get(self, key: Key) -> Connection:
        host = self._host(key)
        if (idle := self._idle(host)) is not None:
            return idle
        if host.open < self.max_per_upstream and not host.waiters:
            host.open += 1
        else:
            # Past the cap a request waits in line as it would in the instance's own queue,
            # for as long as its client does: only connecting has a deadline.
            handed = await self._wait(host)
            if handed is not None and self._fit(handed):
                return handed  # else its slot, or a closed one's, is ours to connect with
        deadline = asyncio.get_running_loop().time() + CONNECT_TIMEOUT_S
        try:
            return await self._connect(key, deadline)
        except BaseException:
            self._free(host)
            raise

    def _host(self, key: Key) -> Host:
        # Not setdefault: its default would be built for every request.
        host = self._hosts.get(key)
        if host is None:
            host = self._hosts[key] = Host()
        return host

    def _idle(self, host: Host) -> Connection | None:
        """A kept connection of `host`'s ready for a request, if one is free."""
        while host.idle:
            conn = host.idle.pop()
            if self._fit(conn):
                return conn
            self._free(host)
        return None

    def _fit(self, conn: Connection) -> bool:
        """Ready `conn` for reuse, or close it (its slot left to the caller) when the
        server has closed it or written to it while it sat idle."""
        if conn.transport is None or conn.lost or readable(conn.transport):
            conn.expiry.cancel()  # its timer would hold the connection till its time
            conn.on_lost = None
            if conn.transport is not None:
                conn.transport.close()
            return False
        conn.expiry.clear()
        conn.reused = True
        conn.begin()
        return True

    async def _wait(self, host: Host) -> Connection | None:
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        host.waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                # Handed something as we gave up: pass it on, so no slot leaks.
                handed = waiter.result()
                if handed is None:
                    self._free(host)
                else:
                    self.put(handed)
            elif waiter in host.waiters:
                host.waiters.remove(waiter)
            raise

    async def _connect(self, key: Key, deadline: float) -> Connection:
        loop = asyncio.get_running_loop()
        where = f"{key[0]}:{key[1]}"
        try:
            async with asyncio.timeout_at(deadline):
                _, conn = await loop.create_connection(
                    lambda: Connection(key, self.head_timeout_s), *key
                )
        except TimeoutError as exc:
            raise NotAnswered(f"no connection to {where} within the timeout", sent=False) from exc
        except OSError as exc:
            raise NotAnswered(f"cannot connect to {where}: {exc}", sent=False) from exc
        assert conn.transport is not None
        if self_connected(conn.transport):
            # Nothing listened, and the kernel gave our end the port we asked for: a TCP
            # simultaneous open. Kept, it would hold the instance's port against its restart.
            conn.transport.close()
            raise NotAnswered(f"cannot connect to {where}: nothing listens", sent=False)
        if conn.lost:
            self._free(self._hosts[key])  # closed before it could be counted out
        else:
            conn.on_lost = self._lost
            assert conn.transport is not None
            set_keepalive(conn.transport)
        return conn

    def put(self, conn: Connection) -> None:
        """Take `conn` back: to the longest waiter, or kept for KEEPALIVE_S at most."""
        host = self._hosts[conn.key]
        if not host.hand(conn):
            host.idle.append(conn)
            conn.expiry.set(KEEPALIVE_S)

    def _free(self, host: Host) -> None:
        """One connection fewer: its slot goes to the longest waiter, if any."""
        if not host.hand(None):
            host.open -= 1

    def _lost(self, conn: Connection) -> None:
        conn.expiry.cancel()
        host = self._hosts[conn.key]
        if conn in host.idle:
            host.idle.remove(conn)
        self._free(host)

    async def close(self) -> None:
        """Close every idle connection (a busy one closes with its answer)."""
        self.close_idle()

    def close_idle(self) -> None:
        """`close`, for a caller outside a coroutine."""
        for host in self._hosts.values():
            for conn in list(host.idle):
                if conn.transport is not None:
                    conn.transport.close()
