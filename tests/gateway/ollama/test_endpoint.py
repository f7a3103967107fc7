"""An Ollama route releases what it leased around the response, not in its body."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Send

from llamad.gateway.access.call import Call
from llamad.gateway.contract.caller import ANYONE
from llamad.gateway.ollama.endpoint import Endpoint
from llamad.listener.departure import DEPARTURE, Departure

pytestmark = pytest.mark.timeout(10)
SCOPE = {"type": "http", "method": "POST", "path": "/api/chat", "headers": [], "query_string": b""}


def call_of(after: asyncio.Future[Message], send: Send) -> Call:
    """A call whose body the door has read; its client's next message is `after`."""

    async def receive() -> Message:
        return await after

    return Call(dict(SCOPE), receive, send, ANYONE, body=b"{}", doc={})


async def test_a_stream_whose_start_cannot_be_written_still_releases_its_lease() -> None:
    released: list[str] = []

    async def handler(call: Call, leases: AsyncExitStack) -> Response:
        leases.callback(released.append, "lease")

        async def lines() -> AsyncIterator[bytes]:
            released.append("body ran")  # never: the start fails first
            yield b"{}\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def send(message: Message) -> None:
        raise OSError("the client went away as the start was written")

    never: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
    with pytest.raises(OSError, match="went away"):
        await Endpoint(handler)(call_of(never, send))
    assert released == ["lease"]


async def test_a_client_that_leaves_while_its_model_loads_cancels_the_wait() -> None:
    waiting = asyncio.Event()
    released: list[str] = []

    async def handler(call: Call, leases: AsyncExitStack) -> Response:
        leases.callback(released.append, "queue place")
        waiting.set()
        await asyncio.Future()  # a load that never ends
        raise AssertionError("unreachable")

    never: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    leaving = Departure(lambda: None)
    call = call_of(never, send)
    call.scope[DEPARTURE] = leaving
    served = asyncio.ensure_future(Endpoint(handler)(call))
    await waiting.wait()
    leaving.leave()
    await served
    assert released == ["queue place"]
    assert sent == []
