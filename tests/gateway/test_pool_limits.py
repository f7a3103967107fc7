"""An upstream's answer is held to a request's limits (N2 of #48): a head past 64 KiB or
100 lines, an endless header line, an endless trailer and a head that trickles past its
deadline each end the answer as `NotAnswered` (a 502 to the client) promptly, with the
connection dropped; a long answer whose head is whole is read as ever."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import pytest
from pool_helpers import JSON, read_request, upstream

from llamad.gateway.relay import connection
from llamad.gateway.relay.connection import Broken, NotAnswered
from llamad.gateway.relay.upstream_pool import Pool

pytestmark = pytest.mark.timeout(30)

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


def hostile(
    write: Writer,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        with contextlib.suppress(ConnectionError):  # cut off by the gateway, as it should be
            await write(writer)

    return handler


async def endless_line(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
    for _ in range(400):  # 400 KiB of one line, in small writes
        writer.write(b"v" * 1024)
        await writer.drain()


async def many_lines(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\n" + b"x-a: b\r\n" * 200 + b"content-length: 0\r\n\r\n")
    await writer.drain()


async def endless_trailer(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: ")
    for _ in range(400):
        writer.write(b"v" * 1024)
        await writer.drain()


async def trickle(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\n")
    for _ in range(60):  # a byte every 50 ms: 3 s for a head that never ends
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(0.05)  # the hostile peer's pace, not a wait of the test's


@pytest.mark.parametrize("write", [endless_line, many_lines, trickle], ids=lambda w: w.__name__)
async def test_a_head_past_its_limits_is_not_answered(write: Writer) -> None:
    pool = Pool(head_timeout=0.5)
    async with upstream(hostile(write)) as (url, _):
        began = time.monotonic()
        with pytest.raises(NotAnswered) as failed:
            await asyncio.wait_for(pool.request("POST", url, "/x", JSON, b"{}"), 20)
        assert time.monotonic() - began < 5
    why = str(failed.value)
    assert connection.TOO_BIG in why or "no whole answer head within 0.5s" in why, why
    await pool.close()


async def test_an_endless_trailer_breaks_the_answer_off() -> None:
    pool = Pool()
    async with upstream(hostile(endless_trailer)) as (url, _):
        answer = await asyncio.wait_for(pool.request("POST", url, "/x", JSON, b"{}"), 10)
        with pytest.raises(Broken):
            await asyncio.wait_for(answer.aread(), 10)
        answer.close()
    await pool.close()
