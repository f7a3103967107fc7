"""gateway.resend: a request that reached a crashed process's successor while it loads
(admitted to the old process, connected once the new one listened) is no answer: it
waits for the successor to serve, and its 503 never reaches the client."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from pool_helpers import read_request, upstream
from supervisor_double import Double, gateway, spec, until

from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.proxy import Relay
from llamad.gateway.relay.resend import answered
from llamad.lifecycle.states import State
from llamad.upstream.connection import NotAnswered
from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)

SCOPE = {"method": "POST", "path": "/v1/completions", "query_string": b"", "headers": []}
LOADING = b'{"error":{"message":"Loading model","type":"unavailable_error","code":503}}'
BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: %d\r\n\r\n%s" % (
    len(LOADING),
    LOADING,
)
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


def scripted(replies: list[bytes], served: list[bytes]) -> Any:
    """An upstream that answers each request with the next of `replies`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while replies:
            await read_request(reader)
            served.append(reply := replies.pop(0))
            writer.write(reply)
            await writer.drain()

    return handler


async def _relay(pool: Pool, up: Upstream, sent: list[dict[str, Any]]) -> None:
    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await Relay(pool).relay(SCOPE, send, up, "/v1/completions", b"{}", lambda _: None)


async def test_a_503_from_a_process_that_replaced_the_leased_one_is_no_answer() -> None:
    sent: list[dict[str, Any]] = []
    pool = Pool()
    async with upstream(scripted([BUSY], [])) as (url, _):
        up = Upstream(url, {}, "m", pid=1, replaced=lambda: True)
        with pytest.raises(NotAnswered) as raised:
            await _relay(pool, up, sent)
    await pool.close()
    assert raised.value.sent
    assert sent == []  # the client saw nothing: the request may go again


async def test_a_503_from_the_leased_process_itself_is_its_answer() -> None:
    sent: list[dict[str, Any]] = []
    pool = Pool()
    async with upstream(scripted([BUSY], [])) as (url, _):
        await _relay(pool, Upstream(url, {}, "m", pid=1), sent)
    await pool.close()
    assert sent[0]["status"] == 503


async def test_a_request_its_successor_took_while_loading_waits_until_it_serves() -> None:
    served: list[bytes] = []
    sent: list[dict[str, Any]] = []
    pool = Pool()
    async with upstream(scripted([BUSY, OK], served)) as (url, _):
        double = Double(auto=False)
        port = int(url.rsplit(":", 1)[1])
        double.add(dataclasses.replace(spec("a", on_demand=False), port=port), State.RUNNING)
        gw = gateway(double)
        async with gw.lease("a") as first:
            double.crash("a")  # restarted: its successor holds the port, and loads
            relayed = asyncio.ensure_future(
                answered(gw, first, lambda up: _relay(pool, up, sent))  # type: ignore[arg-type]
            )
            await until(lambda: len(served) == 1, "the successor said it loads")
            assert not relayed.done(), "the successor's 503 was taken for the answer"
            double.move("a", State.RUNNING)
            await relayed
        await gw.close()
    await pool.close()
    assert served == [BUSY, OK]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [200]
