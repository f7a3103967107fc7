"""On-demand loads and the gateway's stops: make room (evicting what `room.plan` says),
start, wait for ready; stop a model whose stop was claimed, and wait until it is down.

Loads decide on room one at a time, so two cannot both take the last place, then wait
for readiness side by side. A victim is claimed in the same step as the plan that chose
it, so no request can be admitted to it between the choice and the stop.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from llamad.gateway import memory
from llamad.gateway.admission import Slot, StopWhy
from llamad.gateway.port import LoadFailed
from llamad.gateway.room import Loaded, plan
from llamad.gateway.slots import Slots
from llamad.lifecycle.states import Start, State, Stop

log = structlog.get_logger("llamad.gateway")

LIVE = (State.STARTING, State.RUNNING, State.BACKOFF, State.STOPPING)
SETTLED = (State.RUNNING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)
DOWN = (State.IDLE, State.STOPPED, State.FAILED)


class Loads(Slots):
    """Loads, evictions, idle stops and unloads over the slots."""

    async def load(self, name: str, slot: Slot) -> None:
        """Make room for `name`, start it and wait until it settles. Returns once it runs,
        or quietly when a drain (a reload or restart) took it over mid-load: its waiters
        then wait for the drain and load again. Raises LoadFailed."""
        t0, drained = time.monotonic(), slot.drained
        log.info("gateway.load_requested", model=name, waiting=slot.waiting)
        self.notes.load_requested(name, slot.waiting)
        try:
            slot.deciding = True
            async with self._room:
                await self._make_room(name)
                slot.deciding = False
                await self.sup.command(name, Start())
            facts = self.sup.facts(name)
            timeout = (facts.spec.knobs.start_timeout if facts else 0) + 5
            await self.sup.wait_for(name, *SETTLED, timeout=timeout)
            facts = self.sup.facts(name)
            if facts is not None and facts.state is State.RUNNING:
                slot.load_ok()
                self.metrics.loads.labels(name, "ok").inc()
                self.metrics.load_seconds.labels(name).observe(time.monotonic() - t0)
                log.info("gateway.loaded", model=name, seconds=round(time.monotonic() - t0, 3))
                self.notes.loaded(name, time.monotonic() - t0)
                return
            if slot.drained != drained:
                log.info("gateway.load_interrupted", model=name)
                self.metrics.loads.labels(name, "interrupted").inc()
                return
            reason = facts.reason() if facts else "removed from the config"
            # An on-demand model that cannot start does not retry in the background:
            # the next request tries again, and gets the reason if it fails again.
            await self.sup.command(name, Stop())
            if facts is not None:
                knobs = facts.spec.knobs
                slot.load_failed(time.monotonic(), reason, knobs.backoff_initial, knobs.backoff_max)
            log.warning("gateway.load_failed", model=name, reason=reason)
            self.notes.load_failed(name, reason)
            self.metrics.loads.labels(name, "failed").inc()
            raise LoadFailed(name, reason, slot.refused(time.monotonic()) or None)
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
            loaded = self._loaded(exclude=name)
            victims = plan(self.size(name) or 0, loaded, cfg.max_loaded, self._budget(loaded))
            if victims == []:
                return
            # Claimed in the same step as the plan: none of them can take a request now.
            claimed = [s for s in map(self.slot, victims or []) if s.claim_stop(StopWhy.EVICT)]
            if victims is None or len(claimed) < len(victims):
                for slot in claimed:
                    slot.end_stop()
                await self.changed()  # a busy model must finish first
                continue
            # Whatever the stops achieved, the next round plans from what is loaded then.
            await asyncio.gather(*(self.stop_claimed(s) for s in claimed))

    def _loaded(self, exclude: str) -> list[Loaded]:
        out = []
        for n in self.sup.names():
            facts = self.sup.facts(n)
            if n == exclude or facts is None or facts.state not in LIVE:
                continue
            slot = self.slot(n)
            # A model another stop or a drain holds is not ours to evict: wait for it.
            held = slot.busy or not slot.admits
            out.append(Loaded(n, self.size(n) or 0, facts.spec.on_demand, held, slot.last_used))
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

    async def stop_claimed(self, slot: Slot) -> bool:
        """Carry out the stop claimed on `slot` (to IDLE) and wait until the model is down;
        True when it got there. The claim ends either way."""
        name, why = slot.name, slot.stop
        facts = self.sup.facts(name)
        try:
            if facts is None or facts.state in DOWN:
                return True
            size = self.size(name)
            if why is StopWhy.EVICT:
                log.info("gateway.evicted", instance=name, model=name, size_bytes=size)
                self.metrics.evictions.labels(name).inc()
                self.notes.stopped(name, "evict", size)
            else:  # its idle timer, or a client's unload (Ollama's keep_alive 0)
                reason = "unload" if why is StopWhy.UNLOAD else "idle_timeout"
                log.info(
                    "instance.idle_stopped", instance=name, model=name, size_bytes=size,
                    reason=reason,
                )  # fmt: skip
                self.metrics.idle_stops.labels(name).inc()
                self.notes.stopped(name, reason, size)
            await self.sup.command(name, Stop(idle=True))
            timeout = facts.spec.knobs.stop_timeout + 5
            return await self.sup.wait_for(name, *DOWN, timeout=timeout)
        finally:
            slot.end_stop()
            self.poke()

    def stop_soon(self, slot: Slot) -> None:
        """Run the stop claimed on `slot` in the background."""
        self.spawn(self.stop_claimed(slot), f"stop-{slot.name}")
