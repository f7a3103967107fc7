"""The listener's own limits, in process with small ones: 431 for a head past its bytes
or lines, 413 for a body over the limit (by its Content-Length before a byte is read, or
as a chunked body grows), 408 for a head or a body that stops coming, an idle connection
closed without a word, and a body left behind an early answer dropped as it comes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from listener_helpers import post, post_chunked, said, served

from llamad.listener.limits import Limits

pytestmark = pytest.mark.timeout(30)

SMALL = Limits(max_head=2048, max_headers=20, head_timeout=0.5, request_timeout=1.0, max_body=100)


def small() -> Limits:
    return SMALL


async def test_a_head_past_its_bytes_or_lines_is_431() -> None:
    async with served(small) as s:
        long = await s.connect()
        await long.send(b"GET /h HTTP/1.1\r\nHost: x\r\nX-Long: " + b"v" * 4096 + b"\r\n\r\n")
        many = await s.connect()
        await many.send(b"GET /h HTTP/1.1\r\nHost: x\r\n" + b"X-h: v\r\n" * 30 + b"\r\n")
        for client in (long, many):
            reply = await client.reply(method="GET")
            assert (reply.status, reply.headers[b"connection"]) == (431, b"close")
            assert reply.json()["error"]["code"] == "head_too_large"
        assert s.stage.log == []


async def test_a_body_over_the_limit_is_413_before_it_is_read_or_as_it_grows() -> None:
    async with served(small) as s:
        declared = await s.connect()
        await declared.send(b"POST /told HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
        grown = await s.connect()
        await grown.send(post_chunked("/grown", [b"x" * 60, b"x" * 60]))
        for client in (declared, grown):
            reply = await client.reply()
            assert reply.status == 413
            assert reply.json()["error"]["code"] == "body_too_large"
            assert await client.at_eof()  # the only answer: the app's, if any, went nowhere
        assert "began /told" not in s.stage.log


async def test_a_head_or_a_body_that_stops_coming_is_408() -> None:
    async with served(small) as s:
        head = await s.connect()
        await head.send(b"GET /late HTTP/1.1\r\nHost: x\r\n")
        body = await s.connect()
        await body.send(b"POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        began = time.monotonic()
        for client, within in ((head, SMALL.head_timeout), (body, SMALL.request_timeout)):
            reply = await client.reply()
            assert reply.status == 408
            assert reply.json()["error"]["code"] == "deadline"
            assert time.monotonic() - began < within + 1.0


async def test_an_idle_connection_is_closed_without_a_word() -> None:
    async with served(small) as s:
        client = await s.connect()
        await client.send(post("/once", b"x"))
        said(await client.reply(), "/once", b"x")
        async with asyncio.timeout(SMALL.head_timeout + 2):
            assert await client.at_eof()


async def test_a_body_left_behind_an_early_answer_is_dropped_and_the_connection_serves_on() -> None:
    async def refuses(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-length", b"2")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"no"})

    async with served(small) as s:
        s.app.handlers["/guarded"] = refuses
        client = await s.connect()
        await client.send(b"POST /guarded HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        reply = await client.reply()
        assert (reply.status, reply.body) == (401, b"no")
        await client.send(b"0123456789")  # the rest of its body, unread by anyone
        await client.send(post("/next", b"y"))
        said(await client.reply(), "/next", b"y")
