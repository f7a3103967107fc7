"""The relay's upstream pool: kept-alive connections, answers streamed as they come, and
every way an upstream can end an answer early.

A scripted asyncio server plays the upstream for what llama-server can't do on demand
(garbage, a close mid-answer, an answer without a length); reuse and streaming are also
checked against the real llama-server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import free_port, health
from pool_helpers import JSON, OK, body_of, eventually, every_request, read_request, upstream

from llamad.backends.binaries import find_binary
from llamad.upstream import connection as connection_module
from llamad.upstream import pool as pool_module
from llamad.upstream.connection import Broken, NotAnswered
from llamad.upstream.pool import Pool


async def test_a_connection_is_kept_and_reused() -> None:
    pool = Pool()
    ok = every_request(OK)
    async with upstream(ok) as (url, connections):
        for _ in range(3):
            assert await body_of(pool, url) == (200, b"ok")
        assert len(connections) == 1
    await pool.close()


async def test_a_connection_the_server_closed_is_not_reused_and_the_request_goes_again() -> None:
    seen: list[bytes] = []

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Keep-alive promised, then the connection is dropped without reading the next
        # request: as llama-server does after a stream.
        seen.append(await read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        await writer.drain()

    pool = Pool()
    async with upstream(once) as (url, connections):
        assert await body_of(pool, url) == (200, b"ok")
        assert await body_of(pool, url) == (200, b"ok")
        assert len(connections) == 2
    assert len(seen) == 2  # each request reached the upstream once
    await pool.close()


async def test_a_connection_the_server_writes_to_while_idle_is_dropped() -> None:
    pooled = asyncio.Event()

    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await pooled.wait()  # the answer is taken and the connection back in the pool
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale")
        await writer.drain()
        await reader.read()

    pool = Pool()
    async with upstream(chatty) as (url, connections):
        assert await body_of(pool, url) == (200, b"ok")
        conn = next(iter(pool._hosts.values())).idle[0]
        pooled.set()
        await eventually(lambda: conn.lost, "the connection dropped")
        assert await body_of(pool, url) == (200, b"ok")  # on a new connection
        assert len(connections) == 2
    await pool.close()


@pytest.mark.parametrize("version", [b"HTTP/1.1", b"HTTP/1.0"])
async def test_an_answer_without_a_length_ends_with_its_connection(version: bytes) -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(version + b" 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it")

    pool = Pool()
    async with upstream(until_close) as (url, connections):
        assert await body_of(pool, url) == (200, b"all of it")
        assert await body_of(pool, url) == (200, b"all of it")
        assert len(connections) == 2
    await pool.close()


async def test_a_close_mid_answer_raises_broken() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()

    pool = Pool()
    async with upstream(cut) as (url, _):
        answer = await pool.request("POST", url, "/x", JSON, b"{}")
        got: list[bytes] = []

        async def read_all() -> None:
            async for chunk in answer.chunks():
                got.append(chunk)

        with pytest.raises(Broken, match="closed"):
            await read_all()
        answer.close()
        assert b"".join(got) == b"only this"
    await pool.close()


@pytest.mark.parametrize("reply", [b"SPDY/9 what\r\n\r\n", b""], ids=["garbage", "nothing"])
async def test_an_unreadable_or_missing_answer_raises_broken(reply: bytes) -> None:
    async def bad(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()

    pool = Pool()
    async with upstream(bad) as (url, _):
        with pytest.raises(NotAnswered) as caught:
            await pool.request("POST", url, "/x", JSON, b"{}")
        assert caught.value.sent
    await pool.close()


async def test_a_request_cancelled_while_it_waits_closes_its_connection() -> None:
    """A client that leaves before the instance answered: the instance sees the close
    (and llama-server stops working on the request)."""
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        assert await reader.read() == b""  # no answer; wait for the pool to hang up
        closed.set()

    pool = Pool()
    async with upstream(silent) as (url, _):
        waiting = asyncio.ensure_future(pool.request("POST", url, "/x", JSON, b"{}"))
        done, _ = await asyncio.wait({waiting}, timeout=0.2)
        assert not done  # no answer comes
        waiting.cancel()
        await asyncio.wait_for(closed.wait(), 10)
        await eventually(lambda: set(pool.counts().values()) == {(0, 0)}, "nothing kept")
    await pool.close()


async def test_nothing_listening_is_not_answered_and_never_sent() -> None:
    pool = Pool()
    with pytest.raises(NotAnswered) as caught:
        await pool.request("GET", f"http://127.0.0.1:{free_port()}", "/x", [], None)
    assert not caught.value.sent
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)
    assert set(pool.counts().values()) == {(0, 0)}  # the slot it took is back


async def test_a_head_answer_has_no_body_and_its_connection_is_not_reused() -> None:
    pool = Pool()
    head = every_request(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
    async with upstream(head) as (url, connections):
        assert await asyncio.wait_for(body_of(pool, url, "HEAD"), 10) == (200, b"")
        assert await asyncio.wait_for(body_of(pool, url, "HEAD"), 10) == (200, b"")
        assert len(connections) == 2
    await pool.close()


async def test_a_reader_slower_than_the_upstream_pauses_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connection_module, "HIGH_WATER", 64 * 1024)
    size = 4 * 1024 * 1024

    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
        writer.write(b"x" * size)
        await writer.drain()

    pool = Pool()
    async with upstream(big) as (url, _):
        answer = await pool.request("POST", url, "/x", JSON, b"{}")
        conn = answer._conn
        # Nothing reads the answer: the pool stops reading it.
        await eventually(lambda: conn.paused, "reading paused")
        assert conn.buffered < size
        total = sum([len(chunk) async for chunk in answer.chunks()])
        assert total == size
        answer.close()
    await pool.close()


async def test_idle_connections_close_after_the_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "KEEPALIVE_S", 0.05)
    closed = asyncio.Event()

    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        assert await reader.read() == b""  # the pool closed its end
        closed.set()

    pool = Pool()
    async with upstream(keep) as (url, _):
        assert await body_of(pool, url) == (200, b"ok")
        await asyncio.wait_for(closed.wait(), 10)
        await eventually(lambda: set(pool.counts().values()) == {(0, 0)}, "nothing kept")
    await pool.close()


async def test_real_llama_server_keeps_plain_answers_alive_and_streams(
    tiny_model: Path, tmp_path: Path
) -> None:
    port = free_port()
    args = ["-m", str(tiny_model), "--port", str(port), "-c", "256", "-np", "1"]
    log = (tmp_path / "server.log").open("wb")
    proc = await asyncio.create_subprocess_exec(find_binary(None), *args, stdout=log, stderr=log)
    log.close()
    pool = Pool()
    try:
        await eventually(lambda: health(port) == 200, "llama-server ready", timeout=15)
        url = f"http://127.0.0.1:{port}"
        for stream in (False, False, True, True, False):
            body = b'{"prompt": "hi", "max_tokens": 4, "stream": %s}' % str(stream).lower().encode()
            answer = await pool.request("POST", url, "/v1/completions", JSON, body)
            text = b"".join([chunk async for chunk in answer.chunks()])
            assert answer.status == 200
            assert answer.complete
            assert text.rstrip().endswith(b"data: [DONE]") if stream else text.startswith(b"{")
            answer.close()
    finally:
        await pool.close()
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)
