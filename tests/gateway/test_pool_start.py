"""A request written before anyone waits for its answer (`Pool.start`), as the gateway's
lane sends one before it builds the rest of its bookkeeping: written at once on a kept
connection, or when `Pool.answer` gets one; and a request nobody will wait for closes its
connection, so the server stops working on it.
"""

from __future__ import annotations

import asyncio

import pytest
from pool_helpers import JSON, OK, body_of, eventually, every_request, read_request, upstream

from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)


async def test_a_kept_connection_carries_the_request_before_anyone_waits() -> None:
    arrived: asyncio.Queue[bytes] = asyncio.Queue()

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            arrived.put_nowait(await read_request(reader))
            writer.write(OK)

    pool = Pool()
    async with upstream(recording) as (url, connections):
        assert await body_of(pool, url) == (200, b"ok")  # a connection is kept
        await arrived.get()
        sending = pool.start("POST", url, "/early", JSON, b"{}")
        # Written in that step: the server reads it with nobody awaiting its answer.
        async with asyncio.timeout(10):
            assert (await arrived.get()).startswith(b"POST /early HTTP/1.1\r\n")
        answer = await pool.answer(sending)
        assert (answer.status, await answer.aread()) == (200, b"ok")
        answer.close()
        assert len(connections) == 1
    await pool.close()


async def test_without_a_free_connection_the_request_goes_when_its_answer_is_awaited() -> None:
    pool = Pool()
    async with upstream(every_request(OK)) as (url, connections):
        sending = pool.start("POST", url, "/x", JSON, b"{}")
        assert sending.conn is None
        assert connections == []
        answer = await pool.answer(sending)
        assert (answer.status, await answer.aread()) == (200, b"ok")
        answer.close()
        assert len(connections) == 1
    await pool.close()


async def test_a_request_nobody_waits_for_closes_its_connection() -> None:
    closed = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await read_request(reader)  # the second one is never answered...
        await reader.read()  # ...and its connection ends from our side
        closed.set()

    pool = Pool()
    async with upstream(slow) as (url, connections):
        assert await body_of(pool, url) == (200, b"ok")
        sending = pool.start("POST", url, "/x", JSON, b"{}")
        assert sending.conn is not None
        sending.abandon()
        async with asyncio.timeout(10):
            await closed.wait()
        await eventually(
            lambda: pool.counts()[("127.0.0.1", int(url.rsplit(":", 1)[1]))] == (0, 0),
            "counted out",
        )
        assert await body_of(pool, url) == (200, b"ok")  # a new connection serves
        assert len(connections) == 2
    await pool.close()


async def test_abandon_after_the_answer_was_awaited_leaves_the_connection_alone() -> None:
    pool = Pool()
    async with upstream(every_request(OK)) as (url, connections):
        assert await body_of(pool, url) == (200, b"ok")
        sending = pool.start("POST", url, "/x", JSON, b"{}")
        answer = await pool.answer(sending)
        await answer.aread()
        answer.close()  # kept for the next request
        sending.abandon()  # the lane's `ended` callback, run after all: nothing to close
        assert await body_of(pool, url) == (200, b"ok")
        assert len(connections) == 1
    await pool.close()
