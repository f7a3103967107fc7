"""Background work under run_retrying: a failure is logged and retried, cleanup always runs."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from llamad.common.retrying import retrying, run_retrying


async def test_a_ticker_that_raises_once_is_logged_and_runs_again() -> None:
    calls: list[int] = []
    again = asyncio.Event()

    async def ticker() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("tick went wrong")
        again.set()
        await asyncio.Future()  # ticks until cancelled

    with capture_logs() as logs:
        async with retrying({"idle": ticker}, initial=0.01, event="gateway.task_failed"):
            await asyncio.wait_for(again.wait(), 5)
    (failed,) = [e for e in logs if e["event"] == "gateway.task_failed"]
    assert failed["service"] == "idle"
    assert failed["error"] == "RuntimeError: tick went wrong"
    assert failed["retry_in_s"] == 0.01
    assert failed["log_level"] == "error"
    assert calls == [0, 1]


async def test_the_cleanup_after_the_block_runs_though_a_task_failed_for_good() -> None:
    failed = asyncio.Event()

    async def broken() -> None:
        failed.set()
        raise OSError("always")

    async def forever() -> None:
        await asyncio.Future()

    with capture_logs():
        async with retrying({"broken": broken, "forever": forever}, initial=60):
            await asyncio.wait_for(failed.wait(), 5)
            tasks = {t.get_name(): t for t in asyncio.all_tasks()}
    # Here: leaving the block did not raise what `broken` raised, and ended both tasks.
    assert tasks["broken"].done()
    assert tasks["forever"].cancelled()


async def test_the_block_s_own_error_still_stops_the_tasks() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Future()

    class ServerFailed(Exception):
        pass

    async def serve() -> None:
        async with retrying({"ticker": forever}):
            await asyncio.wait_for(started.wait(), 5)
            tasks = [t for t in asyncio.all_tasks() if t.get_name() == "ticker"]
            raise ServerFailed(tasks)

    with pytest.raises(ServerFailed) as raised:
        await serve()
    (ticker,) = raised.value.args[0]
    assert ticker.cancelled()


async def test_without_retry_the_failure_is_handed_back_and_stop_ends_the_backoff() -> None:
    async def broken() -> None:
        raise KeyError("x")

    with capture_logs() as logs:
        failure = await asyncio.wait_for(run_retrying("once", broken, retry=False), 5)
        assert isinstance(failure, KeyError)
        stop = asyncio.Event()
        stop.set()  # set already: the first backoff ends at once, and with it the service
        assert await asyncio.wait_for(run_retrying("s", broken, stop, initial=60), 5) is None
    assert [e["retry_in_s"] for e in logs] == [None, 60]
