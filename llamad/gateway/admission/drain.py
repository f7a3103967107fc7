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

from llamad.gateway.admission.scheduler import Scheduler

log = structlog.get_logger("llamad.gateway")

DRAIN_MAX_S = 600.0  # a reload waits this long at most for the requests in flight


@asynccontextmanager
async def drain(sched: Scheduler, removed: list[str], changed: list[str]) -> AsyncIterator[None]:
    """Around a reload's (or a restart's) stops and starts (the supervisor's `draining`):
    entered once the requests in flight to `removed` and `changed` (which includes what
    the reload adds) have ended, at most DRAIN_MAX_S; none is admitted to them until it
    is left. Whether a removed model is unknown to new requests is the supervisor's
    word (`Facts.retiring`): a later reload may want it back while it drains."""
    names = [*removed, *changed]
    slots = [sched.slot(n) for n in names]
    for slot in slots:
        slot.begin_drain()
    busy = {s.name: s.in_flight for s in slots if s.in_flight}
    if busy:
        log.info("gateway.draining", in_flight=busy)
    try:
        async with asyncio.timeout(DRAIN_MAX_S):
            while any(s.in_flight for s in slots):
                await sched.slots.changed()
    except TimeoutError:
        pass  # past the bound the reload goes on: a stuck client must not block it
    try:
        yield
    finally:
        for slot in slots:
            slot.end_drain()
        for name, slot in zip(names, slots, strict=True):
            if sched.sup.facts(name) is None:
                if not slot.drains:
                    sched.slots.forget(name)  # gone from the supervisor: its waiters get 404
                continue
            # Measured, and maybe refused, under the old spec: estimate and try afresh.
            slot.measured = None
            slot.load_ok()
        sched.slots.poke()
