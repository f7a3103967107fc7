"""The pool reads the HTTP/1.1 that servers write: chunked bodies with trailers, answers
that end their connection, HTTP/1.0 (test_pool.py has one without a length), interim 1xx
answers; and gives bodies whole or line by line.
"""

from __future__ import annotations

import asyncio

import pytest
from pool_helpers import JSON, body_of, eventually, every_request, read_request, upstream

from llamad.upstream.answer import Answer
from llamad.upstream.connection import Connection
from llamad.upstream.pool import Pool

CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


async def test_a_chunked_answer_with_trailers_is_read_whole_and_kept() -> None:
    reply = CHUNKED + b"2\r\nok\r\n3\r\n!!!\r\n0\r\nx-checksum: abc\r\n\r\n"
    pool = Pool()
    async with upstream(every_request(reply)) as (url, connections):
        for _ in range(2):
            answer = await pool.request("POST", url, "/x", JSON, b"{}")
            assert await asyncio.wait_for(answer.aread(), 10) == b"ok!!!"
            assert answer.complete
            assert (b"x-checksum", b"abc") not in answer.headers  # a trailer, not the head's
            answer.close()
        assert len(connections) == 1
    await pool.close()


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok", True),
    ],
    ids=["connection-close", "http-1.0", "http-1.0-keep-alive"],
)
async def test_a_connection_is_kept_only_when_the_answer_says_so(reply: bytes, kept: bool) -> None:
    pool = Pool()
    async with upstream(every_request(reply)) as (url, connections):
        for _ in range(2):
            assert await asyncio.wait_for(body_of(pool, url), 10) == (200, b"ok")
        assert len(connections) == (1 if kept else 2)
    await pool.close()


@pytest.mark.parametrize("apart", [False, True], ids=["one-write", "interim-first"])
async def test_interim_answers_are_skipped_for_the_final_one(apart: bool) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n"
    final = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\nx-final: yes\r\n\r\nok"

    async def hinting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(interim if apart else interim + final)
            if apart:
                await writer.drain()
                writer.write(final)

    pool = Pool()
    async with upstream(hinting) as (url, connections):
        for _ in range(2):
            answer = await asyncio.wait_for(pool.request("POST", url, "/x", JSON, b"{}"), 10)
            assert answer.status == 201
            assert answer.headers == [(b"content-length", b"2"), (b"x-final", b"yes")]
            assert await asyncio.wait_for(answer.aread(), 10) == b"ok"
            answer.close()
        assert len(connections) == 1  # the interim answers did not end the exchange
    await pool.close()


async def test_lines_split_where_lines_end_whatever_the_chunks() -> None:
    """Fed to the connection piece by piece, each piece read before the next, so the
    answer's chunks end mid-line, after a CR and inside a two-byte character."""
    conn = Connection(("upstream", 80))
    conn.data_received(CHUNKED)
    await conn.head
    answer = Answer(conn, lambda _: None, head_only=False)
    lines: list[str] = []

    async def read() -> None:
        lines.extend([line async for line in answer.lines()])

    reading = asyncio.ensure_future(read())
    pieces = [b'data: {"a":', b"1}\r", b"\n\nda", b"ta: \xc3", b"\xa9\r\n", b"last"]
    for piece in pieces:
        conn.data_received(b"%x\r\n%s\r\n" % (len(piece), piece))
        await eventually(lambda: not conn.buffered, "the piece read")
    conn.data_received(b"0\r\n\r\n")
    await asyncio.wait_for(reading, 10)
    assert lines == ['data: {"a":1}', "", "data: \u00e9", "last"]
