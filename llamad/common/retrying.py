"""Background work that outlives its own failures: a failure is logged, then it runs again.

A bare `create_task` that raises dies silently, and whoever awaits it at shutdown gets the
stored exception instead of finishing the cleanup. The daemon's services, the gateway's
idle ticker and fleet refresher, and the reloader's rolling restart run through
`run_retrying` instead: a failure is logged, and the work runs again after a backoff
(or, for work that must not be repeated, the failure is handed back to the caller).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import structlog

log = structlog.get_logger("llamad.daemon")

RETRY_INITIAL_S, RETRY_MAX_S = 1.0, 30.0

Service = Callable[[], Awaitable[object]]


async def run_retrying(
    name: str,
    service: Service,
    stop: asyncio.Event | None = None,
    *,
    retry: bool = True,
    initial: float = RETRY_INITIAL_S,
    maximum: float = RETRY_MAX_S,
    event: str = "daemon.service_failed",
) -> Exception | None:
    """Run `service()` until it returns or `stop` is set; cancel to end it at once.

    A failure is logged as `event` (with `service=name`). With `retry`, the service runs
    again after a delay doubling from `initial` up to `maximum`; without, the failure is
    returned (None when the service ended well or `stop` was set).
    """
    delay = initial
    while True:
        try:
            await service()
            return None
        except Exception as exc:  # whatever one piece of work raises must not end the rest
            log.error(
                event,
                service=name,
                error=describe(exc),
                retry_in_s=delay if retry else None,
                exc_info=exc,
            )
            if not retry:
                return exc
        if await rest(delay, stop):
            return None
        delay = min(delay * 2, maximum)


async def rest(delay: float, stop: asyncio.Event | None) -> bool:
    """Wait `delay` seconds between two tries, or less when `stop` is set; True when it is."""
    if stop is None:
        await asyncio.sleep(delay)
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)
    return stop.is_set()


@contextlib.asynccontextmanager
async def retrying(
    services: Mapping[str, Service],
    stop: asyncio.Event | None = None,
    *,
    initial: float = RETRY_INITIAL_S,
    event: str = "daemon.service_failed",
) -> AsyncIterator[None]:
    """Run each of `services` (by task name) under `run_retrying` while the block runs;
    on the way out, however the block ended, cancel them and wait until they have."""
    tasks = [
        asyncio.create_task(run_retrying(n, s, stop, initial=initial, event=event), name=n)
        for n, s in services.items()
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        # wait() hands back what they raised instead of raising it: the cleanup after the
        # block runs whatever they did (run_retrying has logged their failures already).
        if tasks:
            await asyncio.wait(tasks)


def describe(exc: BaseException) -> str:
    """`Type: message`, of the errors inside an exception group rather than the group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
