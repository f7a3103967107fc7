"""Flow control both ways: a slow reader holds the app's writes instead of a growing
buffer; an app that has not taken a body stops the reading (and the body's deadline,
which measures the client, not the app); a body in many tiny chunks is held in one
buffer, not an object per chunk."""

from __future__ import annotations

import asyncio
import random
import time
import tracemalloc
from typing import Any

import pytest
from helpers import until
from listener_helpers import post, post_chunked, said, served

from llamad.listener.limits import Limits

pytestmark = pytest.mark.timeout(30)


async def test_a_slow_reader_holds_the_app_on_flow_control() -> None:
    chunk, total = 64 * 1024, 8 * 1024 * 1024
    payload = random.Random(0).randbytes(total)
    sent: list[int] = []
    entered = [0.0]

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for at in range(0, total, chunk):
            entered[0] = time.monotonic()
            part = payload[at : at + chunk]
            await send({"type": "http.response.body", "body": part, "more_body": True})
            entered[0] = 0.0
            sent.append(at)
        await send({"type": "http.response.body", "body": b""})

    def held() -> bool:
        return entered[0] != 0.0 and time.monotonic() - entered[0] > 0.3

    async with served() as s:
        s.app.handlers["/big"] = stream
        # A small receive window, and nothing read until the app's writes are held.
        client = await s.connect(rcvbuf=16 * 1024)
        await client.send(post("/big", b"x"))
        await until(held, 10, "the app held in send()")
        # Unpaced, the app would have written it all in one go: it waits instead.
        assert len(sent) < total // chunk
        reply = await client.reply()
        assert reply.headers[b"transfer-encoding"] == b"chunked"
        assert reply.body == payload


async def test_a_body_the_app_has_not_taken_stops_the_reading_not_the_client() -> None:
    body = random.Random(4).randbytes(2 * 1024 * 1024)
    limits = Limits(request_timeout=1.0, max_body=4 * 1024 * 1024)

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(1.5)  # an app busy elsewhere, past the request's deadline
        got, more = b"", True
        while more:
            message = await receive()
            got += message.get("body", b"")
            more = message.get("more_body", False)
        length = [(b"content-length", str(len(got)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": length})
        await send({"type": "http.response.body", "body": got})

    async with served(lambda: limits) as s:
        s.app.handlers["/slow"] = slow
        client = await s.connect()
        await client.send(post("/slow", body))
        reply = await client.reply()
        assert (reply.status, reply.body == body) == (200, True)


async def test_a_body_in_many_tiny_chunks_is_held_in_one_buffer() -> None:
    size = 20_000
    body = random.Random(3).randbytes(size)
    sent = post_chunked("/tiny", [body[i : i + 1] for i in range(size)])
    peaks: list[int] = []
    async with served() as s:
        release = s.stage.hold("/tiny")

        async def measured(scope: Any, receive: Any, send: Any) -> None:
            await s.stage.begin("/tiny")  # held: the body gathers meanwhile
            peaks.append(tracemalloc.get_traced_memory()[1])
            await s.app({**scope, "path": "/echo"}, receive, send)

        s.app.handlers["/tiny"] = measured
        client = await s.connect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            await client.send(sent)  # built before: the client's bytes are not counted
            await until(lambda: s.stage.log == ["began /tiny"], 10, "the request")
            await until(lambda: client.writer.transport.get_write_buffer_size() == 0, 10, "sent")
            release.set_result(None)
            reply = await client.reply()
        finally:
            tracemalloc.stop()
        said(reply, "/echo", body)
        # One bytes object per chunk would cost ~100 bytes per body byte; one buffer about
        # 13, most of it the wire's 6 bytes per body byte, counted at both ends.
        (peak,) = peaks
        assert peak - base < 20 * size, f"{(peak - base) / size:.0f} bytes held per body byte"


async def test_a_client_that_stops_reading_is_cut_after_the_send_timeout() -> None:
    """N5: an answer's writes that make no progress for `send_timeout` abort the
    connection, and the request sees its client gone (so its lease would be released)."""
    chunk = b"x" * (64 * 1024)
    told = asyncio.Event()

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(256):  # 16 MiB: past any socket buffer
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if (await receive())["type"] == "http.disconnect":
            told.set()

    limits = Limits(send_timeout=0.5)
    async with served(lambda: limits) as s:
        s.app.handlers["/big"] = stream
        client = await s.connect(rcvbuf=16 * 1024)
        await client.send(post("/big", b"x"))  # and never reads
        async with asyncio.timeout(10):
            await told.wait()
