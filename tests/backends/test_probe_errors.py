"""A probe that fails on our side (out of descriptors or buffers, issue #16, item 1; or our
own loop too late to read its answer, issue #23) is not held against the server."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import httpx
import pytest

from llamad.backends.probes import Prober, local_cause


def _wrapped(code: int) -> httpx.ConnectError:
    """An OSError as httpx reports it: raised from httpcore's error, raised from it."""
    try:
        try:
            raise OSError(code, os.strerror(code))
        except OSError as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        return outer


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM])
def test_local_shortages_are_recognised(code: int) -> None:
    cause = local_cause(_wrapped(code))
    assert cause is not None
    assert cause.errno == code


@pytest.mark.parametrize("code", [errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH])
def test_server_side_failures_count(code: int) -> None:
    assert local_cause(_wrapped(code)) is None


class HealthServer:
    """A /health on loopback that answers 200 after `delay` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.handlers: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/health"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        await self.server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(self.delay)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        finally:
            writer.close()
            await writer.wait_closed()


@pytest.mark.timeout(10)
async def test_a_probe_our_busy_loop_made_late_is_not_held_against_the_server() -> None:
    """Our loop is stuck for longer than the probe's timeout while it waits: the probe is
    excused (local, with the lag) rather than failed, whatever the server did."""
    prober = Prober()
    async with HealthServer(5) as url:
        try:
            asyncio.get_running_loop().call_later(0.01, time.sleep, 0.6)  # hogs the loop
            health = await prober.probe(url, 0.3)
        finally:
            await prober.aclose()
    assert not health.ok
    assert health.local
    assert health.loop_lag is not None
    assert health.loop_lag >= 0.2


@pytest.mark.timeout(10)
async def test_a_server_that_does_not_answer_still_fails_its_probe() -> None:
    prober = Prober()
    async with HealthServer(5) as url:
        try:
            health = await prober.probe(url, 0.3)
        finally:
            await prober.aclose()
    assert not health.ok
    assert not health.local
    assert health.loop_lag is None
