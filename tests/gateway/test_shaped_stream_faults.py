"""shaping/live.py against a scripted upstream, for what llama-server can't do on demand:
a choice's stream broken off after others went out, and an error before anything did."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from pool_helpers import read_request, upstream

from llamad.gateway.contract.port import GatewayPort, Upstream
from llamad.gateway.shaping.plan import shape_of
from llamad.gateway.shaping.runner import serve
from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)

SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
BODY = {"model": "m", "messages": [], "n": 2, "stream": True}


class _NoRestart:
    async def restarted(self, upstream: Upstream) -> Upstream | None:
        return None


async def _served(url: str) -> list[dict[str, Any]]:
    """The messages a client of an `n: 2` stream was sent."""
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    shape = shape_of("/v1/chat/completions", BODY)
    assert shape is not None
    pool = Pool()
    try:
        await serve(
            cast(GatewayPort, _NoRestart()), pool, Upstream(url, {}, "m"), shape, asked="m",
            slots=1, send=send, first_byte=lambda _: None, outgoing=lambda _u, _p, b: b,
        )  # fmt: skip
    finally:
        await pool.close()
    return sent


async def test_a_choice_broken_off_after_chunks_went_out_ends_with_an_error_event() -> None:
    calls = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            calls.append(1)
            writer.write(SSE + b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            if len(calls) == 2:  # the second choice dies mid-stream
                await writer.drain()
                return
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    async with upstream(handler) as (url, _):
        sent = await _served(url)
    assert sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert body.count(b'"content": "hi"') == 2  # both choices' chunks went on
    assert b'"index": 1' in body
    assert b"broke off" in body.rsplit(b"\n\n", 2)[-2]  # the last event is the error
    assert sent[-1].get("more_body") is not True


async def test_an_error_before_anything_went_out_is_an_error_answer() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        error = b'{"error": {"code": 400, "message": "no", "type": "invalid_request_error"}}'
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n%s" % (len(error), error)
        )
        await writer.drain()

    async with upstream(handler) as (url, _):
        sent = await _served(url)
    assert sent[0]["status"] == 400
    assert b"no" in sent[1]["body"]


async def test_an_error_event_mid_stream_ends_the_stream_with_its_message() -> None:
    error = b'data: {"error": {"code": 500, "message": "boom", "type": "server_error"}}\n\n'

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        events = CHUNK + error
        writer.write(SSE + b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events))
        await writer.drain()

    async with upstream(handler) as (url, _):
        sent = await _served(url)
    last = b"".join(m.get("body", b"") for m in sent[1:]).rsplit(b"\n\n", 2)[-2]
    assert b"stopped mid-stream: boom" in last
