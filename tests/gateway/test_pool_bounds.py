"""The upstream client bounds an answer's head like a client (a fleet peer is not
trusted): in size (a header line that never ends is "upstream sent too big header") and
in time once it has begun; the wait for a head's first byte stays unbounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from door_helpers import ask
from pool_helpers import OK, body_of, every_request, read_request, upstream
from supervisor_double import Double, spec

from llamad.backends.local_http import Client
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.app import build_app
from llamad.gateway.contract.port import Upstream
from llamad.gateway.core import Gateway
from llamad.gateway.relay.proxy import Relay
from llamad.lifecycle.states import State
from llamad.upstream.connection import TOO_BIG, NotAnswered
from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)

SCOPE = {"method": "POST", "path": "/v1/completions", "query_string": b"", "headers": []}


def endless(start: bytes, piece: bytes) -> Callable[..., Awaitable[None]]:
    """An upstream that answers `start`, then `piece` after `piece`, never ending."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(start)
        while True:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0)  # drain yields only past its high water: let others run

    return handler


# A status line, then one header line that never ends, in small pieces.
endless_header = endless(b"HTTP/1.1 200 OK\r\nx-endless: ", b"a" * 64)
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def stalled_after(head: bytes) -> Callable[..., Awaitable[None]]:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        await writer.drain()
        await reader.read()  # says nothing more until the client leaves

    return handler


async def lag_while(work: Awaitable[Any]) -> tuple[Any, float]:
    """What `work` returned (or raised), and the loop's longest stall meanwhile."""
    worst, running = 0.0, True

    async def ticker() -> None:
        nonlocal worst
        while running:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            worst = max(worst, time.perf_counter() - before - 0.005)

    tick = asyncio.ensure_future(ticker())
    try:
        result: Any = await work
    except Exception as exc:
        result = exc
    finally:
        running = False
        await tick
    return result, worst


async def test_a_header_line_that_never_ends_is_refused_quickly_and_others_go_on() -> None:
    pool = Pool()
    async with upstream(endless_header) as (bad, _), upstream(every_request(OK)) as (good, _):
        started = time.perf_counter()
        refused, worst = await lag_while(body_of(pool, bad))
        assert isinstance(refused, NotAnswered)
        assert TOO_BIG in str(refused)
        assert time.perf_counter() - started < 2
        assert worst < 0.1
        assert await body_of(pool, good) == (200, b"ok")
        assert pool.counts()[("127.0.0.1", int(bad.rsplit(":", 1)[1]))] == (0, 0)
    await pool.close()


async def test_trailers_that_never_end_break_the_answer_off() -> None:
    pool = Pool()
    async with upstream(endless(CHUNKED + b"2\r\nok\r\n0\r\n", b"x-t: v\r\n")) as (url, _):
        with pytest.raises(ConnectionError, match=TOO_BIG):
            await body_of(pool, url)
    await pool.close()


async def test_a_chunk_extension_that_never_ends_breaks_the_answer_off() -> None:
    pool = Pool()
    async with upstream(endless(CHUNKED + b"2;ext=", b"e" * 64)) as (url, _):
        with pytest.raises(ConnectionError, match=TOO_BIG):
            await body_of(pool, url)
    await pool.close()


async def test_a_head_past_the_limit_in_one_read_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"x-h%d: %s\r\n" % (n, b"v" * 64) for n in range(300))
    pool = Pool()
    async with upstream(every_request(head + b"content-length: 2\r\n\r\nok")) as (url, _):
        with pytest.raises(NotAnswered, match=TOO_BIG):
            await body_of(pool, url)
    await pool.close()


async def test_many_small_chunks_and_trailers_are_framing_within_the_allowance() -> None:
    """Each chunk's size line and CRLFs count as framing, and each chunk adds to the
    allowance what its framing may cost: a long stream of small chunks reads whole."""
    chunks = b"".join(b"1;e=1\r\na\r\n" for _ in range(20_000))
    answer = CHUNKED + chunks + b"0\r\nx-t: v\r\n\r\n"
    pool = Pool()
    async with upstream(every_request(answer)) as (url, _):
        assert await body_of(pool, url) == (200, b"a" * 20_000)
    await pool.close()


async def test_a_head_begun_must_end_within_its_deadline() -> None:
    pool = Pool(head_timeout_s=0.3)
    async with upstream(stalled_after(b"HTTP/1.1 200 OK\r\ncontent-le")) as (url, _):
        started = time.perf_counter()
        with pytest.raises(NotAnswered, match="did not end within"):
            await body_of(pool, url)
        assert time.perf_counter() - started < 3
    await pool.close()


async def test_no_deadline_before_the_first_byte_of_a_head() -> None:
    """A whole completion's head comes after its generation: silence is waited out."""
    go = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await go.wait()
        writer.write(OK)
        await writer.drain()

    pool = Pool(head_timeout_s=0.1)
    async with upstream(slow) as (url, _):
        waiting = asyncio.ensure_future(body_of(pool, url))
        done, _ = await asyncio.wait([waiting], timeout=0.5)
        assert not done  # five head deadlines passed: nothing was cut
        go.set()
        assert await waiting == (200, b"ok")
    await pool.close()


async def test_the_relay_answers_a_peer_s_endless_head_as_not_answered() -> None:
    """The gateway's relay: NotAnswered, which the route turns into its 502."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    pool = Pool()
    async with upstream(endless_header) as (url, _):
        up = Upstream(url, {}, "m")
        relay = Relay(pool).relay(SCOPE, send, up, "/v1/completions", b"{}", lambda _: None)
        refused, worst = await lag_while(relay)
    assert isinstance(refused, NotAnswered)
    assert TOO_BIG in str(refused)
    assert sent == []
    assert worst < 0.1
    await pool.close()


async def test_the_probe_client_refuses_an_endless_head_quickly() -> None:
    client = Client()
    async with upstream(endless_header) as (url, _):
        refused, worst = await lag_while(client.request("GET", f"{url}/health", 10))
    client.close()
    assert isinstance(refused, ConnectionError)
    assert TOO_BIG in str(refused)
    assert worst < 0.1


async def test_the_gateway_answers_502_and_health_stays_fast() -> None:
    """The whole app in process, its instance answering with an endless header line: the
    completion is a 502 naming the cause, and another client's /health is not held up."""
    async with upstream(endless_header) as (url, _):
        double = Double()
        double.add(replace(spec("a"), port=int(url.rsplit(":", 1)[1])), State.RUNNING)
        cfg = GatewayConfig(host="127.0.0.1", port=8080, memory_budget=None)
        pool = Pool()
        app = build_app(Gateway(double, lambda: cfg), pool=pool)
        try:
            started = time.perf_counter()
            hostile = asyncio.ensure_future(
                ask(app, "POST", "/v1/completions", {"model": "a", "prompt": "hi"})
            )
            health = []
            while not hostile.done():
                before = time.perf_counter()
                assert (await ask(app, "GET", "/health")).status == 200
                health.append(time.perf_counter() - before)
                await asyncio.sleep(0.005)  # /health never suspends: a pace, not a wait
            got = await hostile
        finally:
            await pool.close()
    assert got.status == 502
    assert TOO_BIG.encode() in got.body
    assert time.perf_counter() - started < 2
    assert max(health) < 0.1
