"""On-demand loads: make room (evicting what `room.plan` says), start, wait for ready.
The stops they and the idle timers claim are carried out in `stops.py`.

Loads decide on room one at a time, so two cannot both take the last place, then wait
for readiness side by side. A victim is claimed in the same step as the plan that chose
it, so no request can be admitted to it between the choice and the stop. A slot's `load`
and `deciding` are written here alone.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.background import Background
from llamad.gateway.admission.devices.choice import choose
from llamad.gateway.admission.devices.fit import Holding, plan_devices, refusal
from llamad.gateway.admission.devices.ledger import Ledger
from llamad.gateway.admission.notes import Notes
from llamad.gateway.admission.room import Loaded
from llamad.gateway.admission.room_rules import arrange, causes
from llamad.gateway.admission.rules import Slot, StopWhy
from llamad.gateway.admission.slots import Slots
from llamad.gateway.admission.stops import Stops
from llamad.gateway.admission.together import Together
from llamad.gateway.books.metrics import GatewayMetrics
from llamad.gateway.contract.port import LoadFailed, NoRoom
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import Start, State, Stop

log = structlog.get_logger("llamad.gateway")

LIVE = (State.STARTING, State.RUNNING, State.BACKOFF, State.STOPPING)
SETTLED = (State.RUNNING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)


class Loads:
    """Loads, evictions, idle stops and unloads over the slots, run in the background."""

    def __init__(
        self,
        supervisor: SupervisorView,
        slots: Slots,
        settings: Callable[[], GatewayConfig],
        metrics: GatewayMetrics,
        notes: Notes,
        ledger: Ledger,
        sets: ModelSets,
    ) -> None:
        self.sup, self.slots, self.settings = supervisor, slots, settings
        self.sets, self.together = sets, Together(supervisor, slots, sets, LIVE)
        self.metrics, self.notes, self.ledger = metrics, notes, ledger
        self._room = asyncio.Lock()
        self.background = Background()
        self.stops = Stops(
            supervisor, slots, metrics, notes, self.together, ledger, self.background
        )

    def join(self, slot: Slot) -> asyncio.Task[None]:
        """The load of `slot` under way, begun now if none is. Raises LoadFailed while a
        failed load's backoff lasts: no respawn, and no eviction, for every request."""
        if slot.load is None:
            if wait := slot.refused(time.monotonic()):
                raise LoadFailed(slot.name, slot.refusal, wait)
            task = self._begin(slot)
            for other in self.together.to_load(slot.name):  # a group loads as one
                self._begin(other)
            return task
        return slot.load

    def _begin(self, slot: Slot) -> asyncio.Task[None]:
        task = self.background.spawn(self.load(slot.name, slot), f"load-{slot.name}")
        slot.load_began(task)
        return task

    def abandon(self, slot: Slot) -> None:
        """Nobody waits for `slot` any more: a load still deciding on room is cancelled,
        so it evicts nothing."""
        if slot.deciding and slot.load is not None:
            slot.load.cancel()

    async def load(self, name: str, slot: Slot) -> None:
        """Make room for `name`, start it and wait until it settles. Returns once it runs,
        or quietly when a drain (a reload or restart) took it over mid-load: its waiters
        then wait for the drain and load again. Raises LoadFailed."""
        t0, drained = time.monotonic(), slot.drained
        log.info("gateway.load_requested", model=name, waiting=slot.waiting)
        self.notes.load_requested(name, slot.waiting)
        try:
            slot.deciding_room(True)
            async with self._room:
                device = await self._make_room(name)
                slot.deciding_room(False)
                await self.sup.command(name, Start(device))
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
            slot.load_ended()
            self.slots.poke()

    async def _make_room(self, name: str) -> str | None:
        """Evict until `name` fits; where to start it (a GPU the gateway chose, or None:
        where its config says)."""
        cfg = self.settings()
        while True:
            await self.ledger.refresh(self.running)
            loaded = self._loaded(exclude=name)
            holdings = {m.name: self.ledger.on(m.name) for m in loaded}
            held = [Holding(m, holdings[m.name]) for m in loaded]
            budgets = self.ledger.budgets(m.name for m in loaded)
            needs = {p: self.ledger.need(name, p) for p in self.ledger.places(name)}
            pinned = [m.name for m in loaded if self.sets.pinned(m.name)]
            device = choose(needs, held, budgets, pinned)
            need = needs[device]
            if line := refusal(name, need, held, budgets):
                log.warning("gateway.no_room", model=name, reason=line)
                self.metrics.loads.labels(name, "no_room").inc()
                raise NoRoom(name, line)
            planner = functools.partial(_plan_among, need, holdings, cfg.max_loaded, budgets)
            waiting = self.slots.slot(name).waiting
            victims = arrange(name, loaded, self.sets, planner, waiting)
            if victims == []:
                if device is not None:
                    log.info("gateway.placed", model=name, device=device)
                return device
            # Claimed in the same step as the plan: none of them can take a request now.
            why = causes(name, victims or [], loaded, self.sets, cfg.max_loaded)
            claimed = [
                s
                for s in map(self.slots.slot, victims or [])
                if s.claim_stop(StopWhy.EVICT, why[s.name])
            ]
            if victims is None or len(claimed) < len(victims):
                for slot in claimed:
                    slot.end_stop()
                await self.slots.changed()  # a busy model must finish first
                continue
            # Whatever the stops achieved, the next round plans from what is loaded then.
            await asyncio.gather(*(self.stops.claimed(s) for s in claimed))

    def _loaded(self, exclude: str) -> list[Loaded]:
        out = []
        for n in self.sup.names():
            facts = self.sup.facts(n)
            if n == exclude or facts is None or facts.state not in LIVE:
                continue
            slot = self.slots.slot(n)
            # A model another stop or a drain holds is not ours to evict: wait for it.
            held = slot.busy or not slot.admits
            out.append(Loaded(n, self.size(n) or 0, facts.spec.on_demand, held, slot.last_used))
        return out

    def running(self) -> list[str]:
        """The models whose process runs now (what holds device memory)."""
        facts = (self.sup.facts(n) for n in self.sup.names())
        return [f.name for f in facts if f is not None and f.state is State.RUNNING]

    def size(self, name: str) -> int | None:
        """The measured footprint of `name` once it has run, else its estimate."""
        return self.ledger.size(name)

    async def close(self) -> None:
        """Cancel loads and stops under way (shutdown)."""
        await self.background.close()


def _plan_among(
    need: Mapping[str, int],
    holdings: Mapping[str, Mapping[str, int]],
    max_loaded: int,
    budgets: Mapping[str, int | None],
    models: Sequence[Loaded],
) -> list[str] | None:
    """`plan_devices` among `models` (those pins, groups and sets leave to choose from)."""
    return plan_devices(need, [Holding(m, holdings[m.name]) for m in models], max_loaded, budgets)
