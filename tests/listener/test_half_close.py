"""A client's EOF is its leaving, as uvicorn and nginx (for a proxied request) take it.

TCP shows a half-close (SHUT_WR after the body) as it shows a close, and a client that
closed must not keep a model busy: the request it left sees it gone, nothing more is
written, and the connection closes. No 100 Continue is sent to probe it.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from listener_helpers import post, served

pytestmark = pytest.mark.timeout(30)


async def raw(port: int, data: bytes) -> socket.socket:
    """A blocking-free socket that sent `data` and shut its writing side."""
    sock = socket.socket()
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, data)
    sock.shutdown(socket.SHUT_WR)
    return sock


async def read(sock: socket.socket, until_: bytes | None = None) -> bytes:
    """What comes on `sock` until EOF (or `until_` has come)."""
    got, loop = b"", asyncio.get_running_loop()
    async with asyncio.timeout(10):
        while until_ is None or until_ not in got:
            data = await loop.sock_recv(sock, 65536)
            if not data:
                break
            got += data
    return got


@pytest.mark.parametrize("pipelined", [False, True], ids=["one", "pipelined"])
async def test_a_half_close_is_the_client_leaving(pipelined: bool) -> None:
    told = asyncio.Event()

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        told.set()

    async with served() as s:
        s.app.handlers["/wait"] = waits
        more = post("/2", b"b") if pipelined else b""
        sock = await raw(s.port, post("/wait", b"the whole body") + more)
        with sock:
            async with asyncio.timeout(10):
                await told.wait()
            assert await read(sock) == b""  # no probe, no answer: the connection closed
        assert s.stage.log == []  # what was queued behind it never began


async def test_a_client_that_closes_is_told() -> None:
    told = asyncio.Event()

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        told.set()

    async with served() as s:
        s.app.handlers["/wait"] = waits
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(post("/wait", b"x"))
        sock.close()
        async with asyncio.timeout(10):
            await told.wait()


CUT = [
    b"POST /x HTTP/1.1\r\nHost: x\r\n",
    b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nhalf",
]


@pytest.mark.parametrize("cut", CUT, ids=["half-a-head", "half-a-body"])
async def test_a_request_cut_short_by_the_eof_gets_no_answer(cut: bytes) -> None:
    async with served() as s:
        sock = await raw(s.port, cut)
        with sock:
            assert await read(sock) == b""
