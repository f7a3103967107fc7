"""gateway.proxy: a whole answer (not a stream) goes on only once all of it is in, so an
instance or peer that dies mid-body leaves the request free to be sent again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pool_helpers import read_request, upstream

from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.proxy import Relay
from llamad.upstream.connection import NotAnswered
from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)

SCOPE = {"method": "POST", "path": "/v1/completions", "query_string": b"", "headers": []}
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: 10\r\n\r\n"


async def _relay(url: str, sent: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Relay one request to `url`; the messages the client's side was sent (into `sent`
    as they go, when given)."""
    sent = [] if sent is None else sent

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    pool = Pool()
    try:
        up = Upstream(url, {}, "m")
        await Relay(pool).relay(SCOPE, send, up, "/v1/completions", b"{}", lambda _: None)
    finally:
        await pool.close()
    return sent


async def test_a_whole_answer_cut_mid_body_is_not_answered_and_nothing_went_on() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD % b"application/json" + b"half")
        await writer.drain()  # then closed: the process died mid-answer

    sent: list[dict[str, Any]] = []
    async with upstream(cut) as (url, _):
        with pytest.raises(NotAnswered) as raised:
            sent = await _relay(url)
    assert raised.value.sent
    assert sent == []  # the client saw nothing: the request may go again


async def test_a_whole_answer_in_pieces_goes_on_whole_once_its_end_is_in() -> None:
    first, more = asyncio.Event(), asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD % b"application/json" + b"0123")
        await writer.drain()
        first.set()
        await more.wait()  # the rest only when the test says
        writer.write(b"456789")
        await writer.drain()

    async with upstream(held) as (url, _):
        sent: list[dict[str, Any]] = []
        relayed = asyncio.ensure_future(_relay(url, sent))
        await asyncio.wait_for(first.wait(), 10)
        # Half of it is out: the relay waits for the rest and sends the client nothing.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(relayed), 0.2)
        assert sent == []
        more.set()
        await asyncio.wait_for(relayed, 10)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"0123456789"


async def test_a_stream_cut_mid_body_still_goes_on_as_it_comes() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD % b"text/event-stream" + b"data:")
        await writer.drain()

    async with upstream(cut) as (url, _):
        sent = await _relay(url)
    assert sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert body.startswith(b"data:")
    assert b"broke off" in body  # the stream ends with an error event
