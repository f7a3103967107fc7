"""An Ollama route releases what it leased around the response, not in its body."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message

from llamad.gateway.ollama.endpoint import Endpoint

pytestmark = pytest.mark.timeout(10)
SCOPE = {"type": "http", "method": "POST", "path": "/api/chat", "headers": [], "query_string": b""}


def body_then(after: asyncio.Future[Message]) -> object:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"{}", "more_body": False}
        return await after

    return receive


async def test_a_stream_whose_start_cannot_be_written_still_releases_its_lease() -> None:
    released: list[str] = []

    async def handler(request: Request, leases: AsyncExitStack) -> Response:
        leases.callback(released.append, "lease")

        async def lines() -> AsyncIterator[bytes]:
            released.append("body ran")  # never: the start fails first
            yield b"{}\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def send(message: Message) -> None:
        raise OSError("the client went away as the start was written")

    never: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
    with pytest.raises(OSError, match="went away"):
        await Endpoint(handler)(SCOPE, body_then(never), send)  # type: ignore[arg-type]
    assert released == ["lease"]


async def test_a_client_that_leaves_while_its_model_loads_cancels_the_wait() -> None:
    waiting = asyncio.Event()
    released: list[str] = []

    async def handler(request: Request, leases: AsyncExitStack) -> Response:
        leases.callback(released.append, "queue place")
        waiting.set()
        await asyncio.Future()  # a load that never ends
        raise AssertionError("unreachable")

    gone: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    call = asyncio.ensure_future(Endpoint(handler)(SCOPE, body_then(gone), send))  # type: ignore[arg-type]
    await waiting.wait()
    gone.set_result({"type": "http.disconnect"})
    await call
    assert released == ["queue place"]
    assert sent == []
