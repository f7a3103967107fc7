"""The listener speaks HTTP/1.1 as a client sees it on the wire.

Raw requests on sockets, each answer parsed by h11: an answer has a length or is chunked
and its connection serves the next request; a body reaches the app byte for byte; the
target is read into its path and query (escapes, a fragment, the absolute form);
HTTP/1.0 gets its answer then the close; a HEAD's answer and a 204's have no body;
`Expect: 100-continue` is answered when the app reads; every answer has a Date; and what
would let a request be read two ways (request smuggling) is a 400, the only answer
written, with one line in the log.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import structlog.testing
from listener_helpers import post, post_chunked, said, served

pytestmark = pytest.mark.timeout(30)


async def chunked_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-by", b"me")]})
    for part in (b"one,", b"two,", b"three"):
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def no_content(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def test_answers_are_framed_and_the_connection_serves_on() -> None:
    async with served() as s:
        s.app.handlers["/chunked"] = chunked_app
        client = await s.connect()
        await client.send(post("/a", b"first"))
        first = await client.reply()
        said(first, "/a", b"first")
        assert first.headers[b"content-length"] == str(len(first.body)).encode()
        assert b"transfer-encoding" not in first.headers
        assert b"connection" not in first.headers  # kept alive
        assert first.headers[b"date"].endswith(b" GMT")
        await client.send(b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
        second = await client.reply(method="GET")
        assert second.headers[b"transfer-encoding"] == b"chunked"
        assert second.body == b"one,two,three"
        await client.send(post("/c", b"third"))
        said(await client.reply(), "/c", b"third")


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_reaches_the_app_as_sent(chunked: bool) -> None:
    # Past the 64 KiB the listener holds for an app before it stops reading.
    body = random.Random(1).randbytes(300_000)
    parts = [body[:30_000], body[30_000:]]
    extra = "X-Custom: kept"
    sent = post_chunked("/b", parts, extra) if chunked else post("/b", body, extra)
    async with served() as s:
        client = await s.connect()
        await client.send(sent)
        doc = said(await client.reply(), "/b", body)
        headers = dict(doc["headers"])
        assert headers["x-custom"] == "kept"
        assert headers.get("transfer-encoding" if chunked else "content-length") == (
            "chunked" if chunked else str(len(body))
        )


TARGETS = {
    "escaped": (b"/p/%78%20y", "/p/x y", "/p/%78%20y", ""),
    "query": (b"/p?a=1&b=2", "/p", "/p", "a=1&b=2"),
    "fragment": (b"/p?a=1#frag", "/p", "/p", "a=1"),
    "absolute": (b"http://x/p?q", "/p", "/p", "q"),
}


@pytest.mark.parametrize("case", list(TARGETS))
async def test_the_target_is_read_into_its_path_and_query(case: str) -> None:
    target, path, raw, query = TARGETS[case]
    async with served() as s:
        client = await s.connect()
        await client.send(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        doc = (await client.reply(method="GET")).json()
        assert (doc["path"], doc["raw_path"], doc["query"]) == (path, raw, query)


async def test_http_1_0_gets_its_answer_then_the_close() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(post("/old", b"hi", version="1.0"))
        doc = said(await client.reply(), "/old", b"hi")
        assert doc["http_version"] == "1.0"
        assert await client.at_eof()


async def test_head_and_204_answers_have_no_body() -> None:
    async with served() as s:
        s.app.handlers["/none"] = no_content
        client = await s.connect()
        await client.send(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await client.reply(method="HEAD")
        assert head.status == 200
        assert int(head.headers[b"content-length"]) > 0
        assert head.body == b""
        await client.send(b"GET /none HTTP/1.1\r\nHost: x\r\n\r\n")
        none = await client.reply(method="GET")
        assert (none.status, none.body) == (204, b"")
        assert b"transfer-encoding" not in none.headers
        await client.send(post("/after", b"x"))  # the framing held: the next is read whole
        said(await client.reply(), "/after", b"x")


async def test_expect_100_continue_is_answered_when_the_app_reads() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(
            b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        # The body goes only once the 100 has come, as a careful client does.
        assert (await client.read_until(b"\r\n\r\n")).startswith(b"HTTP/1.1 100 ")
        await client.send(b"body")
        said(await client.reply(), "/e", b"body")


SMUGGLED = {
    "cl-and-te": b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two-lengths": b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
    b"Content-Length: 30\r\n\r\nabc",
    "obs-fold": b"GET /s HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
    "bare-lf": b"GET /s HTTP/1.1\nHost: x\n\n",
    "te-not-chunked-last": b"POST /s HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked, gzip\r\n\r\n",
    "bad-chunk-size": b"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "space-in-name": b"GET /s HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n",
    "not-http": b"\x16\x03\x01 garbage that is not HTTP\r\n\r\n",
}


@pytest.mark.parametrize("case", list(SMUGGLED))
async def test_what_could_be_read_two_ways_is_answered_400_and_nothing_else(case: str) -> None:
    async with served() as s:
        client = await s.connect()
        with structlog.testing.capture_logs() as logs:
            await client.send(SMUGGLED[case])
            got = await client.to_eof()
        # One answer, the 400: a request whose head was read before the parser refused
        # its body reached the app, which was told its client had gone.
        assert got.startswith(b"HTTP/1.1 400 Bad Request\r\n"), got
        assert got.endswith(b"\r\n\r\nInvalid HTTP request received.")
        assert got.count(b"HTTP/1.1 ") == 1
        (line,) = [e for e in logs if e["event"] == "listener.invalid_request"]
        assert line["message"] == "Invalid HTTP request received."


async def test_an_answered_request_is_not_undone_by_garbage_after_it() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(post("/fine", b"x") + b"\x00\x01 not a request\r\n\r\n")
        said(await client.reply(), "/fine", b"x")
        rest = await client.to_eof()
        assert rest.startswith(b"HTTP/1.1 400 ")
