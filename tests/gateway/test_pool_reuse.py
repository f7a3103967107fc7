"""When the pool sends a request again (never on a fresh connection), which kept
connections it trusts, how many it opens to one upstream, and which get TCP keep-alive.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from pool_helpers import JSON, OK, body_of, eventually, read_request, upstream

from llamad.upstream.connection import NotAnswered
from llamad.upstream.pool import Pool
from llamad.upstream.sockets import readable, self_connected, set_keepalive, wants_keepalive


@pytest.mark.parametrize(
    "farewell", [b"", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale"], ids=["closed", "wrote"]
)
async def test_a_kept_connection_with_anything_pending_is_dropped_before_reuse(
    farewell: bytes,
) -> None:
    """The server closed (or wrote to) a kept connection that the event loop has not read
    yet: the pool sees it pending on the socket and writes the request elsewhere."""
    seen: list[int] = []
    bye = asyncio.Event()

    async def leaving(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(seen)
        seen.append(0)
        while True:
            await read_request(reader)
            seen[index] += 1
            writer.write(OK)
            await writer.drain()
            if index == 0:
                await bye.wait()
                writer.write(farewell)
                return  # the harness closes the connection

    pool = Pool()
    async with upstream(leaving) as (url, _):
        assert await body_of(pool, url) == (200, b"ok")
        (host,) = pool._hosts.values()
        kept = host.idle[0]
        transport = kept.transport
        assert transport is not None
        transport.pause_reading()  # so only the socket knows what comes
        bye.set()
        await eventually(lambda: readable(transport), "the farewell pending")
        assert await asyncio.wait_for(body_of(pool, url), 10) == (200, b"ok")
        assert seen == [1, 1]  # each request written once, the second on a new connection
        assert not kept.reused
    await pool.close()


def answer_first_then_hang_up(seen: list[bytes]) -> Any:
    """Each connection answers its first request and closes at its second, unanswered."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()
        seen.append(await read_request(reader))

    return handler


async def test_a_kept_connection_closed_with_no_answer_byte_sends_the_request_again() -> None:
    seen: list[bytes] = []
    pool = Pool()
    async with upstream(answer_first_then_hang_up(seen)) as (url, connections):
        for _ in range(3):
            assert await asyncio.wait_for(body_of(pool, url), 10) == (200, b"ok")
        assert len(connections) == 3
    assert len(seen) == 5  # requests 2 and 3 each went once more, on a new connection
    await pool.close()


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 200"], ids=["nothing", "half-a-head"])
async def test_a_fresh_connection_that_breaks_before_the_head_is_not_sent_again(
    reply: bytes,
) -> None:
    seen: list[bytes] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(reply)
        await writer.drain()

    pool = Pool()
    async with upstream(hang_up) as (url, connections):
        with pytest.raises(NotAnswered) as caught:
            await asyncio.wait_for(pool.request("POST", url, "/x", JSON, b"{}"), 10)
        assert caught.value.sent
        assert len(seen) == len(connections) == 1
    await pool.close()


async def test_a_kept_connection_that_sent_part_of_a_head_is_not_sent_again() -> None:
    seen: list[bytes] = []

    async def half(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        seen.append(await read_request(reader))
        writer.write(b"HTTP/1.1 200")
        await writer.drain()

    pool = Pool()
    async with upstream(half) as (url, connections):
        assert await asyncio.wait_for(body_of(pool, url), 10) == (200, b"ok")
        with pytest.raises(NotAnswered):
            await asyncio.wait_for(body_of(pool, url), 10)
        assert (len(seen), len(connections)) == (2, 1)
    await pool.close()


def test_keepalive_is_for_peers_off_this_machine() -> None:
    for local in ("127.0.0.1", "127.8.9.1", "::1"):
        assert not wants_keepalive(local)
    for remote in ("192.168.1.20", "10.0.0.1", "100.64.0.7", "fe80::1%en0", "2001:db8::1"):
        assert wants_keepalive(remote)


class _Transport:
    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.extra = {"socket": sock, "peername": (peer, 8080)}

    def get_extra_info(self, name: str) -> object:
        return self.extra.get(name)


@pytest.mark.parametrize(("peer", "on"), [("192.0.2.1", True), ("127.0.0.1", False)])
def test_keepalive_is_set_on_the_socket_of_a_remote_peer(peer: str, on: bool) -> None:
    with socket.socket() as sock:
        assert set_keepalive(_Transport(sock, peer)) is on  # type: ignore[arg-type]
        assert bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)) is on


async def test_a_connection_to_itself_is_refused_not_kept() -> None:
    """A socket bound to a port nobody listens on, connecting to that port, is connected to
    itself (a TCP simultaneous open): the pool's check sees both ends are one."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.connect(sock.getsockname())
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=sock.dup())
        try:
            assert self_connected(transport)
        finally:
            transport.close()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        transport, _ = await asyncio.get_running_loop().create_connection(
            asyncio.Protocol, *server.getsockname()
        )
        try:
            assert not self_connected(transport)
        finally:
            transport.close()
