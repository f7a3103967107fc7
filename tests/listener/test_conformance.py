"""What the listener reads and writes as RFC 9110/9112 and nginx have it: a trailer or a
chunk extension counts against the head limit, Host is required and single (and an
absolute-form target's authority is it), a transfer coding other than chunked is 501, a
version other than 1.0 and 1.1 is 505, an answer given before an expected body closes the
connection, and an app's header h11 would not write is a 500 that never goes out."""

from __future__ import annotations

import time
from typing import Any

import pytest
from differential import Requests
from listener_helpers import post, said, served

from llamad.listener.limits import Limits, Refusal
from llamad.listener.reader import Reader

pytestmark = pytest.mark.timeout(30)

SMALL = Limits(max_head=2048, max_headers=20, head_timeout=5.0, request_timeout=10.0)


def small() -> Limits:
    return SMALL


CHUNKED = b"POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
ENDLESS = {
    "trailer": CHUNKED + b"1\r\na\r\n0\r\nX-Trailer: ",
    "chunk-extension": CHUNKED + b"1;ext=",
    "trailer-lines": CHUNKED + b"0\r\n",
}


@pytest.mark.parametrize("case", list(ENDLESS))
async def test_a_trailer_or_chunk_extension_that_never_ends_is_431(case: str) -> None:
    async with served(small) as s:
        client = await s.connect()
        await client.send(ENDLESS[case])
        began = time.monotonic()
        piece = b"X-T: v\r\n" * 64 if case == "trailer-lines" else b"a" * 512
        for _ in range(4 * SMALL.max_head // len(piece)):
            await client.send(piece)
        got = await client.to_eof()
        assert got.startswith(b"HTTP/1.1 431 "), got
        assert b'"head_too_large"' in got
        assert time.monotonic() - began < 5


async def test_a_trailer_within_the_limit_is_read_and_dropped() -> None:
    async with served(small) as s:
        client = await s.connect()
        await client.send(CHUNKED + b"3;n=v\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n")
        said(await client.reply(), "/t", b"abc")


REFUSED = {
    "no-host": (b"GET /r HTTP/1.1\r\n\r\n", 400, "bad_host"),
    "two-hosts": (b"GET /r HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "bad_host"),
    "two-hosts-1.0": (b"GET /r HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n", 400, "bad_host"),
    "gzip-chunked": (
        b"POST /r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
        "unknown_coding",
    ),
    "identity": (
        b"POST /r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
        501,
        "unknown_coding",
    ),
    "http-2.0": (b"GET /r HTTP/2.0\r\nHost: x\r\n\r\n", 505, "bad_version"),
    "http-0.9": (b"GET /r HTTP/0.9\r\nHost: x\r\n\r\n", 505, "bad_version"),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_a_request_nginx_refuses_is_refused_in_the_familys_shape(case: str) -> None:
    request, status, code = REFUSED[case]
    async with served() as s:
        client = await s.connect()
        await client.send(request)
        got = await client.to_eof()
        assert got.startswith(b"HTTP/1.1 %d " % status), got
        assert got.count(b"HTTP/1.1 ") == 1
        assert f'"code": "{code}"'.encode() in got
        assert s.stage.log == []


async def test_http10_needs_no_host() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(b"GET /ten HTTP/1.0\r\n\r\n")
        reply = await client.reply(method="GET")
        assert (reply.status, reply.json()["path"]) == (200, "/ten")


async def test_an_absolute_form_targets_authority_is_the_host() -> None:
    async with served() as s:
        client = await s.connect()
        await client.send(b"GET http://there:8080/a?b=c HTTP/1.1\r\nHost: here\r\n\r\n")
        reply = await client.reply(method="GET")
        got = reply.json()
        assert (got["path"], got["query"]) == ("/a", "b=c")
        hosts = [v for k, v in got["headers"] if k == "host"]
        assert hosts == ["there:8080"]


async def refuse(scope: Any, receive: Any, send: Any) -> None:
    """A 401 that reads none of its request's body."""
    await send({"type": "http.response.start", "status": 401, "headers": []})
    await send({"type": "http.response.body", "body": b"no"})


async def test_an_answer_before_an_expected_body_closes_the_connection() -> None:
    async with served() as s:
        s.app.handlers["/e"] = refuse
        client = await s.connect()
        # The client gives up on its body and sends its next request: never read as a body.
        await client.send(post("/e", b"", "Expect: 100-continue").replace(b"0\r\n", b"9\r\n"))
        reply = await client.reply()
        assert (reply.status, reply.headers[b"connection"]) == (401, b"close")
        assert reply.informational == []
        await client.send(post("/next", b"123456789"))
        assert await client.at_eof()
        assert s.stage.log == []


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


BAD_HEADERS = {
    "space-in-name": (b"x bad", b"v"),
    "colon-in-name": (b"x:y", b"v"),
    "nul-in-value": (b"x-a", b"a\x00b"),
    "lf-in-value": (b"x-a", b"a\nb"),
    "leading-space": (b"x-a", b" v"),
    "trailing-tab": (b"x-a", b"v\t"),
    "empty-name": (b"", b"v"),
    "odd-length": (b"content-length", b"+2"),
}


def answering(headers: list[tuple[bytes, bytes]]) -> Any:
    """An app that answers 200 with `headers`."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


@pytest.mark.parametrize("case", list(BAD_HEADERS))
async def test_an_apps_header_h11_would_not_write_is_a_500_never_written(case: str) -> None:
    async with served() as s:
        s.app.handlers["/bad"] = answering([BAD_HEADERS[case]])
        client = await s.connect()
        await client.send(post("/bad", b""))
        got = await client.to_eof()
        head, _, body = got.partition(b"\r\n\r\n")
        status, *lines = head.split(b"\r\n")
        assert (status, body) == (b"HTTP/1.1 500 Internal Server Error", b"Internal Server Error")
        names = [line.partition(b":")[0] for line in lines]
        assert names == [b"date", b"content-type", b"content-length", b"connection"]


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
