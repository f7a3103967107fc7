"""The pacing of one process's probes: dense readiness polls while it loads, then one
liveness probe per interval for as long as it lives."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from llamad.backends.probes import Health
from llamad.lifecycle.states import Knobs

Phase = Literal["loading", "ready", "live"]

# Readiness is polled densely at first and more sparsely as a load drags on: the wait is
# late by at most this fraction of the load time, never by more than the cap.
READY_LATENESS = 0.05
READY_MIN_DELAY = 0.02
READY_MAX_DELAY = 0.5


def readiness_delay(elapsed: float) -> float:
    """Seconds to wait before the next readiness poll, `elapsed` seconds into a load."""
    return min(max(elapsed * READY_LATENESS, READY_MIN_DELAY), READY_MAX_DELAY)


async def watch_health(
    probe: Callable[[float], Awaitable[Health]],
    knobs: Callable[[], Knobs],
    report: Callable[[Health, Phase], None],
) -> None:
    """Probe one process (`probe(timeout)`) for as long as it lives: readiness first, then liveness.

    `report(health, phase)` gets every result: "loading" until the first 200, which is
    "ready", then "live". `knobs` is read before every probe so a reload applies at once.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    # Readiness: poll densely while the model loads; a 503 just means "loading".
    while True:
        health = await probe(min(knobs().health_timeout, 2.0))
        report(health, "ready" if health.ok else "loading")
        if health.ok:
            break
        await asyncio.sleep(readiness_delay(loop.time() - started))
    # Liveness: one probe per interval on a fixed cadence, so a hang is caught within
    # health_interval * unhealthy_after + health_timeout.
    tick = loop.time()
    while True:
        tick = max(tick + knobs().health_interval, loop.time())
        await asyncio.sleep(tick - loop.time())
        health = await probe(knobs().health_timeout)
        while health.loop_lag is not None:  # our lateness, not the server's: ask again
            report(health, "live")
            health = await probe(knobs().health_timeout)
        report(health, "live")
