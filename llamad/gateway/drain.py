"""A reload's drain: what it removes or changes finishes its requests before it stops.

A removed model answers 404 to new requests at once; a changed (or restarted) one holds
them until it has been restarted, so none of them reaches the old process or finds the
instance down between its stop and its start. A load the drain interrupts is loaded again
once it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from llamad.gateway.router import Router
from llamad.gateway.scheduler import Scheduler

log = structlog.get_logger("llamad.gateway")

DRAIN_MAX_S = 600.0  # a reload waits this long at most for the requests in flight


@asynccontextmanager
async def drain(
    router: Router, sched: Scheduler, removed: list[str], changed: list[str]
) -> AsyncIterator[None]:
    """Around a reload's (or a restart's) stops and starts (the supervisor's `draining`):
    entered once the requests in flight to `removed` and `changed` (which includes what
    the reload adds) have ended, at most DRAIN_MAX_S; none is admitted to them until it
    is left."""
    router.retiring.update(removed)
    slots = [sched.slot(n) for n in (*removed, *changed)]
    for slot in slots:
        slot.begin_drain()
    busy = {s.name: s.in_flight for s in slots if s.in_flight}
    if busy:
        log.info("gateway.draining", in_flight=busy)
    try:
        async with asyncio.timeout(DRAIN_MAX_S):
            while any(s.in_flight for s in slots):
                await sched.changed()
    except TimeoutError:
        pass  # past the bound the reload goes on: a stuck client must not block it
    try:
        yield
    finally:
        for slot in slots:
            slot.end_drain()
        for name in changed:
            # Measured, and maybe refused, under the old spec: estimate and try afresh.
            sched.slot(name).measured = None
            sched.slot(name).load_ok()
        router.retiring.difference_update(removed)
        for name in removed:
            sched.forget(name)
        sched.poke()
