"""Idle stops: an on-demand model stops `idle_timeout` seconds after its last request.

The timer starts when the last request in flight ends (a long stream is never cut) and
is checked by a ticker, which also arms it for a model a person started and measures
each running model's footprint for the memory budget.
"""

from __future__ import annotations

import asyncio
import time

from llamad.gateway.admission import memory
from llamad.gateway.admission.measuring import Measurer
from llamad.gateway.admission.rules import StopWhy
from llamad.gateway.admission.scheduler import Scheduler
from llamad.lifecycle.states import State

TICK_S = 0.5
MEASURE_EVERY = 10  # ticks: footprints every 5 s are fresh enough for a budget


class IdleTimers:
    """Fires the idle timers of a scheduler's models, and keeps their footprints fresh."""

    def __init__(self, scheduler: Scheduler, measurer: Measurer | None = None) -> None:
        self.sched = scheduler
        self.measurer = measurer or Measurer(memory.footprint)
        self._ticks = 0

    def expires_at(self, name: str) -> float | None:
        """Wall-clock epoch seconds of `name`'s idle stop, when its timer is armed."""
        expires = self.sched.slot(name).expires
        return None if expires is None else time.time() + expires - time.monotonic()

    async def run(self) -> None:
        """Tick until cancelled. Estimates (a GGUF header parse) and footprints (a read of
        /proc/PID/smaps_rollup, or proc_pid_rusage, per server) are taken in a thread: on
        the loop, every request in flight would wait for them. A footprint that does not
        come within the measurer's deadline is no measurement, never a stalled ticker."""
        while True:
            if self._ticks % (MEASURE_EVERY * 4) == 0:
                await asyncio.to_thread(self._warm)
            stale = self._unmeasured() if self._ticks % MEASURE_EVERY else self._running()
            if stale:
                sizes = await self.measurer.sizes(stale)
                for name in set(sizes) & set(self.sched.sup.names()):
                    self.sched.slot(name).measured = sizes[name] or self.sched.slot(name).measured
            self.tick(time.monotonic())
            await asyncio.sleep(TICK_S)

    def _running(self) -> dict[str, int | None]:
        running = {n: self.sched.sup.facts(n) for n in self.sched.sup.names()}
        return {n: f.pid for n, f in running.items() if f and f.state is State.RUNNING}

    def _unmeasured(self) -> dict[str, int | None]:
        return {n: pid for n, pid in self._running().items() if self.sched.slot(n).measured is None}

    def _warm(self) -> None:
        for name in self.sched.sup.names():
            facts = self.sched.sup.facts(name)
            if facts is not None:
                memory.estimate(facts.spec)

    def tick(self, now: float) -> None:
        """One pass: arm timers of models that run without one, stop the expired."""
        self._ticks += 1
        for name in self.sched.sup.names():
            facts, slot = self.sched.sup.facts(name), self.sched.slot(name)
            if facts is None or facts.state is not State.RUNNING:
                continue
            if slot.busy or not slot.admits:
                continue
            if slot.expires is None:
                self.sched.arm(slot)  # started by a person, or its timeout changed
            elif now >= slot.expires and slot.claim_stop(StopWhy.IDLE):
                self.sched.loads.stops.soon(slot)
