"""At most `max_per_upstream` connections to one upstream: past it a request waits, first
come first served, for one to come back, for as long as its caller waits (the connect
timeout bounds connecting only); giving up leaks none.
"""

from __future__ import annotations

import asyncio

import pytest
from pool_helpers import JSON, OK, Handler, eventually, read_request, upstream

from llamad.upstream import pool as pool_module
from llamad.upstream.answer import Answer
from llamad.upstream.pool import Pool


def held(gate: asyncio.Event, seen: list[bytes]) -> Handler:
    """Answers each request once `gate` is set."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            seen.append(await read_request(reader))
            await gate.wait()
            writer.write(OK)

    return handler


def send(pool: Pool, url: str, n: int) -> asyncio.Future[Answer]:
    return asyncio.ensure_future(pool.request("POST", url, "/x", JSON, b'{"n": %d}' % n))


async def queue_up(
    pool: Pool, url: str, seen: list[bytes], held: int, waiting: int
) -> list[asyncio.Future[Answer]]:
    """`held` requests upstream (all the cap allows), then `waiting` more queued behind."""
    sent = [send(pool, url, n) for n in range(held)]
    await eventually(lambda: len(seen) == held, f"{held} requests upstream")
    sent += [send(pool, url, n) for n in range(held, held + waiting)]
    (host,) = pool._hosts.values()
    await eventually(lambda: len(host.waiters) == waiting, f"{waiting} waiting")
    return sent


@pytest.mark.parametrize("cap", [1, 2])
async def test_past_the_cap_requests_wait_for_a_connection_in_order(cap: int) -> None:
    gate, seen = asyncio.Event(), list[bytes]()
    pool = Pool(max_per_upstream=cap)
    async with upstream(held(gate, seen)) as (url, connections):
        sent = await queue_up(pool, url, seen, held=cap, waiting=2)
        assert len(connections) == cap
        gate.set()
        for task in sent:
            answer = await asyncio.wait_for(task, 10)
            assert await asyncio.wait_for(answer.aread(), 10) == b"ok"
            answer.close()
        assert len(connections) == cap  # the waiters were handed the same ones
        assert list(pool.counts().values()) == [(cap, cap)]
    if cap == 1:  # one connection: what it carried shows who was served first
        assert [body[-2:] for body in seen] == [b"0}", b"1}", b"2}"]
    await pool.close()


async def test_a_waiter_that_leaves_takes_no_connection_with_it() -> None:
    gate, seen = asyncio.Event(), list[bytes]()
    pool = Pool(max_per_upstream=1)
    async with upstream(held(gate, seen)) as (url, _):
        holder, left_early, left_late = await queue_up(pool, url, seen, held=1, waiting=2)
        left_early.cancel()
        gate.set()
        answer = await asyncio.wait_for(holder, 10)
        await asyncio.wait_for(answer.aread(), 10)
        answer.close()  # hands the connection to left_late, which leaves before it runs
        left_late.cancel()
        for task in (left_early, left_late):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert list(pool.counts().values()) == [(1, 1)]  # back in the pool, idle
        again = await asyncio.wait_for(send(pool, url, 3), 10)
        assert await asyncio.wait_for(again.aread(), 10) == b"ok"
        again.close()
    await pool.close()


async def test_a_closed_connection_frees_its_place_for_a_waiter() -> None:
    gate, seen = asyncio.Event(), list[bytes]()
    pool = Pool(max_per_upstream=1)
    async with upstream(held(gate, seen)) as (url, connections):
        holder, waiter = await queue_up(pool, url, seen, held=1, waiting=1)
        holder.cancel()  # the client left: its connection is closed, not given back
        gate.set()
        answer = await asyncio.wait_for(waiter, 10)
        assert await asyncio.wait_for(answer.aread(), 10) == b"ok"
        answer.close()
        assert len(connections) == 2
        assert list(pool.counts().values()) == [(1, 1)]
    await pool.close()


async def test_a_wait_for_a_busy_connection_outlasts_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting in line is queueing, as in the instance's own queue: not a failure to
    connect. Under 128 streaming clients, a bound here turned waits into 502s."""
    monkeypatch.setattr(pool_module, "CONNECT_TIMEOUT_S", 0.2)
    gate, seen = asyncio.Event(), list[bytes]()
    pool = Pool(max_per_upstream=1)
    async with upstream(held(gate, seen)) as (url, _):
        (holder,) = await queue_up(pool, url, seen, held=1, waiting=0)
        waiter = asyncio.ensure_future(send(pool, url, 1))
        done, _ = await asyncio.wait({waiter}, timeout=1.0)  # five connect timeouts
        assert not done, "the wait gave up"
        gate.set()
        (await asyncio.wait_for(holder, 10)).close()
        (await asyncio.wait_for(waiter, 10)).close()
        assert len(seen) == 2
    await pool.close()
