"""On-demand loads: make room (evicting what `room.plan` says), start, wait for ready.

Loads decide on room one at a time, so two cannot both take the last place, then wait
for readiness side by side.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from llamad.gateway import memory
from llamad.gateway.port import LoadFailed
from llamad.gateway.room import Loaded, plan
from llamad.gateway.slots import Slot, Slots
from llamad.lifecycle.states import Start, State, Stop

log = structlog.get_logger("llamad.gateway")

LIVE = (State.STARTING, State.RUNNING, State.BACKOFF, State.STOPPING)
_SETTLED = (State.RUNNING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)


class Loads(Slots):
    """Loads, evictions and unloads over the slots."""

    async def _load(self, name: str, slot: Slot) -> None:
        t0 = time.monotonic()
        log.info("gateway.load_requested", model=name, waiting=slot.waiting)
        try:
            slot.deciding = True
            async with self._room:
                await self._make_room(name)
                slot.deciding = False
                await self.sup.command(name, Start())
            spec = self.sup.facts(name)
            timeout = (spec.spec.knobs.start_timeout if spec else 0) + 5
            await self.sup.wait_for(name, *_SETTLED, timeout=timeout)
            facts = self.sup.facts(name)
            if facts is None or facts.state is not State.RUNNING:
                reason = facts.reason() if facts else "removed from the config"
                # An on-demand model that cannot start does not retry in the background:
                # the next request tries again, and gets the reason if it fails again.
                await self.sup.command(name, Stop())
                log.warning("gateway.load_failed", model=name, reason=reason)
                self.metrics.loads.labels(name, "failed").inc()
                raise LoadFailed(name, reason)
            self.metrics.loads.labels(name, "ok").inc()
            self.metrics.load_seconds.labels(name).observe(time.monotonic() - t0)
            log.info("gateway.loaded", model=name, seconds=round(time.monotonic() - t0, 3))
        except asyncio.CancelledError:
            log.info("gateway.load_cancelled", model=name)
            self.metrics.loads.labels(name, "cancelled").inc()
            raise
        finally:
            slot.deciding = False
            slot.load = None
            self.poke()

    async def _make_room(self, name: str) -> None:
        cfg = self.settings()
        while True:
            need = self.size(name) or 0
            loaded = self._loaded(exclude=name)
            victims = plan(need, loaded, cfg.max_loaded, self._budget(loaded))
            if victims is not None:
                await asyncio.gather(*(self.stop(v, evict=True) for v in victims))
                return
            await self.changed()

    def _loaded(self, exclude: str) -> list[Loaded]:
        out = []
        for n in self.sup.names():
            facts = self.sup.facts(n)
            if n == exclude or facts is None or facts.state not in LIVE:
                continue
            slot = self.slot(n)
            out.append(
                Loaded(n, self.size(n) or 0, facts.spec.on_demand, slot.busy, slot.last_used)
            )
        return out

    def _budget(self, loaded: list[Loaded]) -> int | None:
        budget = self.settings().memory_budget
        if budget != "auto":
            return budget
        return memory.auto_budget(self.slot(m.name).measured for m in loaded)

    def size(self, name: str) -> int | None:
        """The measured footprint of `name` once it has run, else its estimate."""
        facts = self.sup.facts(name)
        measured = self.slot(name).measured
        if measured is not None or facts is None:
            return measured
        return memory.estimate(facts.spec)

    async def stop(self, name: str, *, evict: bool = False) -> None:
        """Stop `name` to IDLE (an eviction, else an idle stop) and wait until it is down."""
        slot = self.slot(name)
        facts = self.sup.facts(name)
        if facts is None or slot.stopping:
            return
        slot.stopping = True
        slot.expires = None
        try:
            size = self.size(name)
            if evict:
                log.info("gateway.evicted", instance=name, model=name, size_bytes=size)
                self.metrics.evictions.labels(name).inc()
            else:
                log.info("instance.idle_stopped", instance=name, model=name, size_bytes=size)
                self.metrics.idle_stops.labels(name).inc()
            await self.sup.command(name, Stop(idle=True))
            timeout = facts.spec.knobs.stop_timeout + 5
            await self.sup.wait_for(name, State.IDLE, State.STOPPED, State.FAILED, timeout=timeout)
        finally:
            slot.stopping = False
            self.poke()

    async def unload(self, name: str) -> None:
        """Stop `name` now if nothing is in flight, else once the last request ends."""
        slot = self.slot(name)
        if slot.in_flight or slot.waiting:
            slot.keep_alive = 0.0
            return
        await self.stop(name)
