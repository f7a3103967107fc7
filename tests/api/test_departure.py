"""The guarded listener tells a request's `Departure` when its client goes: the work
`guard` runs for it is cancelled with no task reading `receive()` for the disconnect."""

from __future__ import annotations

import asyncio
import socket

import pytest
from helpers import free_port, until
from starlette.types import Receive, Scope, Send

from llamad.gateway.access.client_side import guard, read_body
from llamad.listener.departure import departure
from llamad.listener.tcp import serve_tcp

pytestmark = pytest.mark.timeout(30)


class Held:
    """An app whose requests wait for ever inside `guard`, and what became of each."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.had_departure: list[bool] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await read_body(receive)
        leaving = departure(scope)
        self.had_departure.append(leaving is not None)

        async def work() -> None:
            self.started.set()
            try:
                await asyncio.Event().wait()  # a load or a stream that would go on
            except asyncio.CancelledError:
                self.cancelled.set()
                raise

        await guard(work(), leaving)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_a_client_that_closes_cancels_its_request_through_the_departure() -> None:
    app, port, stop = Held(), free_port(), asyncio.Event()
    server = asyncio.ensure_future(serve_tcp(app, "127.0.0.1", port, stop))
    try:
        await until(lambda: _listening(port), 10, "the listener")
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        await writer.drain()
        async with asyncio.timeout(10):
            await app.started.wait()
        writer.close()
        async with asyncio.timeout(10):
            await app.cancelled.wait()
        assert app.had_departure == [True]
    finally:
        stop.set()
        async with asyncio.timeout(15):
            await server
