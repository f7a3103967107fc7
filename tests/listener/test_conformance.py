"""What RFC 9112 and nginx refuse, refused as they do; trailers and chunk extensions held
to the head's limit as their bytes come; an early answer to `Expect: 100-continue` closing
its connection; and answer headers held to what h11 would write."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import structlog
from differential import Requests
from listener_helpers import post, said, served

from llamad.listener.limits import Limits, Refusal
from llamad.listener.reader import Reader

pytestmark = pytest.mark.timeout(30)

SMALL = Limits(max_head=2048, max_headers=20, head_timeout=2.0, request_timeout=10.0)


def small() -> Limits:
    return SMALL


REFUSED = {
    "no host in 1.1": (b"GET /r HTTP/1.1\r\n\r\n", 400, "host_required"),
    "two hosts": (b"GET /r HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "host_required"),
    "gzip, chunked": (
        b"POST /r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
        "coding_not_implemented",
    ),
    "identity": (
        b"POST /r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
        501,
        "coding_not_implemented",
    ),
    "HTTP/2.0": (b"GET /r HTTP/2.0\r\nHost: x\r\n\r\n", 505, "version_not_supported"),
    "HTTP/0.9": (b"GET /r HTTP/0.9\r\nHost: x\r\n\r\n", 505, "version_not_supported"),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_what_rfc_9112_refuses_is_refused_with_its_status(case: str) -> None:
    data, status, code = REFUSED[case]
    async with served() as s:
        client = await s.connect()
        await client.send(data)
        reply = await client.reply(method="GET")
        assert (reply.status, reply.json()["error"]["code"]) == (status, code)
        assert await client.at_eof()
        assert s.stage.log == []


async def test_http_1_0_needs_no_host_and_absolute_form_names_the_host() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(b"GET /old HTTP/1.0\r\n\r\n")
        said(await client.reply(method="GET"), "/old", b"")
        client = await s.connect()
        # RFC 9112 3.2.2: the target's authority is the host, whatever the Host header says.
        await client.send(b"GET http://good.test:81/abs?q=1 HTTP/1.1\r\nHost: other.test\r\n\r\n")
        doc = said(await client.reply(method="GET"), "/abs", b"")
        assert ["host", "good.test:81"] in doc["headers"]
        assert ["host", "other.test"] not in doc["headers"]


def _endless(kind: str) -> bytes:
    head = b"POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    if kind == "trailer":
        return head + b"3\r\nabc\r\n0\r\nX-Trailer: "
    return head + b"3;ext="  # a chunk extension that never ends


@pytest.mark.parametrize("kind", ["trailer", "extension"])
async def test_an_endless_trailer_or_chunk_extension_is_431_at_the_head_limit(kind: str) -> None:
    """N1: the bytes after the head that are not body data count as the head's do."""
    async with served(small) as s:
        client = await s.connect()
        await client.send(_endless(kind))
        began = time.monotonic()
        with structlog.testing.capture_logs():
            for _ in range(64):  # 64 KiB, 32 times the limit, in small writes
                try:
                    await client.send(b"v" * 1024)
                except ConnectionError:
                    break
            got = await client.to_eof()
        assert got.startswith(b"HTTP/1.1 431 "), got[:80]
        assert b"head_too_large" in got
        assert time.monotonic() - began < SMALL.head_timeout  # not the deadline: the bytes


async def test_many_small_chunks_are_not_taken_for_a_long_head() -> None:
    async with served(small) as s:
        client = await s.connect()
        parts = [b"x"] * 3000  # 3000 chunks, their framing well past the head's 2 KiB
        head = b"POST /many HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        body = b"".join(b"1\r\n%b\r\n" % p for p in parts) + b"0\r\nX-T: 1\r\n\r\n"
        await client.send(head + body)
        said(await client.reply(), "/many", b"x" * 3000)


async def test_an_early_answer_to_expect_100_continue_closes_its_connection() -> None:
    """The client may send the body it was told to wait with, or not: what follows cannot
    be read as the next request (RFC 9110 10.1.1)."""

    async def early(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no"})

    async with served() as s:
        s.app.handlers["/early"] = early
        client = await s.connect()
        await client.send(
            b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\nExpect: 100-continue\r\n\r\n"
        )
        reply = await client.reply()
        assert (reply.status, reply.headers[b"connection"]) == (401, b"close")
        # What a client that waits sends next: never answered as a request.
        await client.send(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n" + b" " * 26)
        assert await client.to_eof() == b""
        assert "began /next" not in s.stage.log


BAD_HEADERS = [
    (b"x-a", b"1\r\nx-b: 2"),
    (b"x-a", b"1\nx-b"),
    (b"x\ra", b"1"),
    (b"x a", b"1"),
    (b"x:a", b"1"),
    (b"", b"1"),
    (b"x-a", b"nul\x00here"),
    (b"x-a", b" leading"),
    (b"x-a", b"trailing "),
    (b"content-length", b"+2"),
]


@pytest.mark.parametrize("header", BAD_HEADERS)
async def test_an_answer_header_h11_would_not_write_is_never_written(
    header: tuple[bytes, bytes],
) -> None:
    async def bad(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [header]})
        await send({"type": "http.response.body", "body": b"x"})

    async with served() as s:
        s.app.handlers["/bad"] = bad
        client = await s.connect()
        with structlog.testing.capture_logs():
            await client.send(b"GET /bad HTTP/1.1\r\nHost: x\r\n\r\n")
            got = await asyncio.wait_for(client.to_eof(), 5)
        assert got.startswith(b"HTTP/1.1 500 "), got
        assert b"x-a" not in got
        assert b"x-b" not in got


CHUNKED = b"POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


async def test_a_trailer_within_the_limit_is_read_and_dropped() -> None:
    async with served(small) as s:
        client = await s.connect()
        await client.send(CHUNKED + b"3;n=v\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n")
        said(await client.reply(), "/t", b"abc")


async def refuse(scope: Any, receive: Any, send: Any) -> None:
    """A 401 that reads none of its request's body."""
    await send({"type": "http.response.start", "status": 401, "headers": []})
    await send({"type": "http.response.body", "body": b"no"})


async def test_an_answer_before_an_expected_body_that_came_keeps_the_connection() -> None:
    async with served() as s:
        s.app.handlers["/e"] = refuse
        s.stage.hold("/never")
        client = await s.connect()
        await client.send(post("/x", b"1") + post("/e", b"abc", "Expect: 100-continue"))
        said(await client.reply(), "/x", b"1")
        reply = await client.reply()
        assert reply.status == 401
        assert b"connection" not in reply.headers
        await client.send(post("/y", b"2"))
        said(await client.reply(), "/y", b"2")


def answering(headers: list[tuple[bytes, bytes]]) -> Any:
    """An app that answers 200 with `headers`."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


async def test_an_apps_good_headers_go_as_written() -> None:
    headers = [(b"X-Mixed", b"a  b\tc"), (b"x-empty", b""), (b"x-obs", "é".encode())]
    async with served() as s:
        s.app.handlers["/good"] = answering(headers)
        client = await s.connect()
        await client.send(post("/good", b""))
        reply = await client.reply()
        assert reply.status == 200
        assert reply.headers[b"x-mixed"] == b"a  b\tc"
        assert reply.headers[b"x-empty"] == b""


def test_an_endless_trailer_line_is_refused_within_twice_the_limit_fed() -> None:
    requests = Requests()
    reader = Reader(requests)
    reader.feed(CHUNKED + b"0\r\nX-Trailer: ")
    fed, piece, refused = 0, b"a" * 16384, None
    while refused is None and fed < 100 * requests.limits.max_head:
        fed += len(piece)
        try:
            reader.feed(piece)
        except Refusal as why:
            refused = why
    assert refused is not None
    assert refused.status == 431
    assert fed <= 2 * requests.limits.max_head


def test_a_long_body_of_small_chunks_is_not_taken_for_a_long_head() -> None:
    requests = Requests()
    reader = Reader(requests)
    chunks = b"".join(b"%x;e=1\r\n%b\r\n" % (100, b"c" * 100) for _ in range(20_000))
    data = CHUNKED + chunks + b"0\r\n\r\n"
    for at in range(0, len(data), 262_144):  # asyncio's largest read
        reader.feed(data[at : at + 262_144])
    (request,) = requests.outcome.requests
    assert len(request.body) == 2_000_000
