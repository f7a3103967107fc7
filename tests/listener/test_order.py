"""Requests on one connection are answered in order, each whole or broken off; a client's
leaving is told; a graceful shutdown lets answers in flight out, saying close.

Pipelined requests start one after the other; an app that fails before answering gets
its client a 500 and a closed connection, one that fails mid-answer (or writes more or
less than its Content-Length) has its connection closed, so no client reads half an
answer as the whole; a client that closes its connection has its request's `receive()`
end in a disconnect; a shutdown lets a held answer out saying `connection: close`, also
one whose body was still being read when it began.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import pytest
from helpers import until
from listener_helpers import post, said, served

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("second", ["/b", "/b?pipelined=again"])
async def test_pipelined_requests_are_answered_one_after_the_other(second: str) -> None:
    async with served() as s:
        release = s.stage.hold("/a")
        client = await s.connect()
        await client.send(post("/a", b"one") + post(second, b"two"))
        await until(lambda: s.stage.log == ["began /a"], 10, "the first begun")
        release.set_result(None)
        one, two = await client.reply(), await client.reply()
        said(one, "/a", b"one")
        said(two, "/b", b"two")
        assert s.stage.log == ["began /a", "answered /a", "began /b", "answered /b"]


async def test_many_pipelined_requests_keep_their_order() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(b"".join(post(f"/{n}", str(n).encode()) for n in range(40)))
        for n in range(40):
            said(await client.reply(), f"/{n}", str(n).encode())


async def fails_before(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("a bug in the app")


async def fails_after_head(scope: Any, receive: Any, send: Any) -> None:
    headers = [] if scope["query_string"] == b"chunked" else [(b"content-length", b"100")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"part of it", "more_body": True})
    raise RuntimeError("upstream went away mid-answer")


async def returns_silent(scope: Any, receive: Any, send: Any) -> None:
    return None


@pytest.mark.parametrize("app", [fails_before, returns_silent])
async def test_an_app_that_fails_before_answering_gets_a_500_and_a_close(app: Any) -> None:
    async with served() as s:
        s.app.handlers["/boom"] = app
        client = await s.connect()
        await client.send(post("/boom", b"x"))
        reply = await client.reply()
        assert (reply.status, reply.headers[b"connection"]) == (500, b"close")
        assert await client.at_eof()
        again = await s.connect()  # the listener serves on
        await again.send(post("/fine", b"y"))
        said(await again.reply(), "/fine", b"y")


@pytest.mark.parametrize("query", ["length", "chunked"])
async def test_an_app_that_fails_mid_answer_breaks_the_connection_off(query: str) -> None:
    async with served() as s:
        s.app.handlers["/half"] = fails_after_head
        client = await s.connect()
        await client.send(post(f"/half?{query}", b"x"))
        with pytest.raises(h11.RemoteProtocolError):
            await client.reply()  # the head came, then EOF before the body's end


@pytest.mark.parametrize(("declared", "sent"), [(100, 10), (5, 10)], ids=["shorter", "longer"])
async def test_an_answer_not_matching_its_content_length_closes_its_connection(
    declared: int, sent: int
) -> None:
    async def mismatched(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-length", str(declared).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"b" * sent})

    async with served() as s:
        s.app.handlers["/m"] = mismatched
        client = await s.connect()
        # Kept alive, the client would read the next answer into this one's body (or wait
        # for the bytes owed): the connection goes with the answer instead.
        await client.send(post("/m", b"x") + post("/next", b"y"))
        head, _, body = (await client.to_eof()).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert body == b"b" * min(declared, sent)


async def test_a_client_that_closes_ends_its_requests_receive() -> None:
    ended: list[str] = []

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        ended.append("disconnect")

    async with served() as s:
        s.app.handlers["/wait"] = waits
        client = await s.connect()
        await client.send(post("/wait", b"x"))
        await until(lambda: client.writer.transport.get_write_buffer_size() == 0, 5, "sent")
        client.close()
        await until(lambda: ended == ["disconnect"], 10, "the disconnect told")


async def test_a_graceful_shutdown_lets_a_held_answer_out_saying_close() -> None:
    async with served() as s:
        release = s.stage.hold("/held")
        client, idle = await s.connect(), await s.connect()
        await client.send(post("/held", b"x"))
        await until(lambda: s.stage.log == ["began /held"], 10, "the request")
        s.stop.set()
        await until(lambda: s.listener.closing, 5, "the shutdown begun")
        assert await idle.at_eof()  # waiting for a request: closed at once
        release.set_result(None)
        reply = await client.reply()
        said(reply, "/held", b"x")
        assert reply.headers[b"connection"] == b"close"
        assert await client.at_eof()
        async with asyncio.timeout(10):
            await s.task  # the server exits


async def test_a_shutdown_while_a_body_is_read_makes_its_answer_say_close() -> None:
    heads: list[str] = []

    async with served() as s:
        echo = s.app.__call__

        async def told_first(scope: Any, receive: Any, send: Any) -> None:
            heads.append(scope["path"])
            await echo({**scope, "path": "/echo"}, receive, send)

        s.app.handlers["/slow"] = told_first
        client = await s.connect()
        await client.send(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n")
        await until(lambda: heads == ["/slow"], 10, "the head read")
        s.stop.set()
        await until(lambda: s.listener.closing, 5, "the shutdown begun")
        await client.send(b"body")
        reply = await client.reply()
        said(reply, "/echo", b"body")
        assert reply.headers[b"connection"] == b"close"
        assert await client.at_eof()
        async with asyncio.timeout(10):
            await s.task
