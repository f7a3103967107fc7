"""A client that half-closes after whole requests (red team F8) is answered.

It sends its POST, shuts its writing side (SHUT_WR: EOF after the body) and reads: every
answer it is owed comes, the last saying close, then EOF. TCP shows that EOF as it shows
a close, so the listener writes a 100 Continue while no answer has begun: a client that
did close answers it with a reset, and its request is cancelled as before. A request cut
short by the EOF (half a head, half a body) gets no answer.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import h11
import pytest
from helpers import until
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


def answers(data: bytes, count: int) -> list[tuple[int, dict[bytes, bytes], bytes]]:
    """`count` answers parsed from `data`, all of what came before EOF (1xx skipped)."""
    conn, out = h11.Connection(h11.CLIENT), []
    conn.receive_data(data)
    for n in range(count):
        conn.send(h11.Request(method="POST", target="/", headers=[("host", "x")]))
        conn.send(h11.EndOfMessage())
        status, headers, body = 0, {}, b""
        while not isinstance(event := conn.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                conn.receive_data(b"")  # EOF: h11 says so if an answer was cut short
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, dict(event.headers)
            elif isinstance(event, h11.Data):
                body += event.data
        out.append((status, headers, body))
        if n < count - 1:
            conn.start_next_cycle()
    assert not conn.trailing_data[0], "more than the answers owed"
    return out


@pytest.mark.parametrize("held", [False, True], ids=["answered-at-once", "answered-later"])
async def test_a_whole_post_then_a_half_close_is_answered(held: bool) -> None:
    async with served() as s:
        release = s.stage.hold("/f8") if held else None
        sock = await raw(s.port, post("/f8", b"the whole body"))
        with sock:
            if release is not None:
                await until(lambda: s.stage.log == ["began /f8"], 10, "the request")
                # The listener saw the EOF: it probes with a 100 before any answer.
                assert (await read(sock, b"\r\n\r\n")).startswith(b"HTTP/1.1 100 Continue")
                release.set_result(None)
            ((status, headers, body),) = answers(await read(sock), 1)
        assert status == 200
        assert b'"body": "the whole body"' in body
        assert not held or headers[b"connection"] == b"close"


async def test_pipelined_posts_then_a_half_close_are_all_answered() -> None:
    async with served() as s:
        release = s.stage.hold("/1")
        sock = await raw(s.port, post("/1", b"a") + post("/2", b"b") + post("/3", b"c"))
        with sock:
            await until(lambda: s.stage.log == ["began /1"], 10, "the first")
            release.set_result(None)
            got = answers(await read(sock), 3)
        assert [b'"path": "/%d"' % n in body for n, (_, _, body) in enumerate(got, 1)] == [True] * 3
        assert got[-1][1][b"connection"] == b"close"


async def test_a_client_that_closed_is_told_through_the_probe() -> None:
    told = asyncio.Event()

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        told.set()

    async with served() as s:
        s.app.handlers["/wait"] = waits
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(post("/wait", b"x"))
        sock.close()  # a close, which the listener first sees as a half-close
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
