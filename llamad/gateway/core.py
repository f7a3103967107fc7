"""The gateway: model views, leases on upstreams, unloads and what status shows."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any

import structlog

from llamad.backends.probes import server_url
from llamad.backends.registry import backend_for
from llamad.config.gateway_table import GatewayConfig as Settings
from llamad.gateway import keys, memory
from llamad.gateway.activity import Activity, Listener, Record
from llamad.gateway.activity import current as current_tally
from llamad.gateway.activity_metrics import ActivityMetrics
from llamad.gateway.activity_stats import KeyTotals, model_rates
from llamad.gateway.bus import EventBus
from llamad.gateway.drain import drain
from llamad.gateway.fleet import FleetModels
from llamad.gateway.idle import IdleTimers
from llamad.gateway.instance_auth import instance_auth
from llamad.gateway.loads import LIVE
from llamad.gateway.metrics import GatewayMetrics
from llamad.gateway.notes import BusNotes
from llamad.gateway.port import (
    GatewayError,
    ModelView,
    Unavailable,
    UnknownModel,
    Upstream,
    UpstreamError,
)
from llamad.gateway.progress import LoadProgress
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.hints import current as current_hints
from llamad.gateway.replicas.lease import ReplicaLeases
from llamad.gateway.replicas.peer_upstream import remote_upstream
from llamad.gateway.replicas.snapshot import Snapshot
from llamad.gateway.router import Router
from llamad.gateway.scheduler import Scheduler
from llamad.gateway.state_watch import StateWatch
from llamad.gateway.view import SupervisorView
from llamad.gateway.views import Views
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

log = structlog.get_logger("llamad.gateway")


class Gateway:
    """Implements `port.GatewayPort` over the supervisor."""

    def __init__(
        self,
        supervisor: SupervisorView,
        settings: Callable[[], Settings],
        metrics: GatewayMetrics | None = None,
        fleet: FleetModels | None = None,
        pending: Callable[[str], GatewayError | None] | None = None,
        balancer: Balancer | None = None,
    ) -> None:
        self.settings = settings
        self.fleet = fleet
        self.router = Router(supervisor)
        self.bus = EventBus()
        self.progress = LoadProgress()
        notes = BusNotes(self.bus, self.progress, lambda name: self.sched.size(name))
        self.sched = Scheduler(supervisor, settings, metrics, notes)
        self.idle = IdleTimers(self.sched)
        self.metrics = self.sched.metrics
        self.metrics.watch(self.sched.counts)
        self.created = int(time.time())
        # Why a name no model answers to is not served yet (a pull under way), else None:
        # asked only on that miss path, never for a routed request.
        self.pending = pending
        # Per-request activity: the ring, the live stream, Prometheus and usage per key.
        self.key_totals = KeyTotals()
        listeners: list[Listener] = [
            ActivityMetrics(self.metrics.registry),
            self.key_totals,
            self._announce,
        ]
        self.activity = Activity(lambda: self.settings().activity_size, listeners)
        self.watch = StateWatch(supervisor, self.bus, self.progress, self.sched.size)
        # Shared with the fleet, which reads our counts on a peer as its status arrives.
        self.balancer = balancer or Balancer(settings().affinity_size)
        self.views = Views(self.router, self.sched, self.idle, self.progress, self._fleet)
        self.replicas = ReplicaLeases(
            Snapshot(self.router, self.sched, self._fleet),
            self.sched,
            self.balancer,
            self._fleet,
            settings,
            self._upstream,
        )

    def _fleet(self) -> FleetModels | None:
        """The fleet's models while `[gateway] fleet` is on, else None."""
        return self.fleet if self.fleet is not None and self.settings().fleet else None

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        """The drain around a reload's or a restart's stops and starts
        (`Supervisor.draining`)."""
        return drain(self.router, self.sched, removed, changed)

    async def run(self) -> None:
        """The idle ticker; cancel to stop, then `close()`."""
        await self.idle.run()

    async def close(self) -> None:
        """Cancel loads and stops under way; end the live streams."""
        self.bus.close()
        await self.sched.close()

    def _announce(self, record: Record) -> None:
        if self.bus.subscribers:  # no dict to build when nobody reads
            self.bus.publish("request", record.to_dict())

    # The port --------------------------------------------------------------------

    def models(self) -> list[ModelView]:
        """Every routable model, never waiting on a load: this host's, then the fleet's
        that no local name shadows."""
        # A named key limited to some models lists only those.
        return [v for v in self.views.all() if keys.may_use(v.name)]

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (instance name or alias), or None."""
        facts = self.router.find(name)
        if facts is not None:
            return self.views.local(facts)
        return next((v for v in self.views.all() if name in (v.name, *v.aliases)), None)

    @asynccontextmanager
    async def lease(self, name: str, *, keep_alive: float | None = None) -> AsyncIterator[Upstream]:
        """Load `name` if needed and count it in flight while the context is open; a
        model only a `[fleet]` peer serves goes to that peer's gateway."""
        facts = self.router.find(name)
        tally = current_tally()
        if tally is not None:
            tally.model = name
        hints = current_hints()
        if not hints.relayed and self.replicas.several(name):
            keys.check(facts.name if facts is not None else name)
            self.balancer.resize(self.settings().affinity_size)
            if not self.settings().affinity:
                hints = replace(hints, prefix=(), affinity=False)
            async with self.replicas.lease(name, hints, keep_alive) as upstream:
                yield upstream
            return
        if facts is None and hints.relayed:
            raise self._unknown(name, self.router.names())  # never relayed twice: no loops
        if facts is None:
            async with self._remote_lease(name) as upstream:
                yield upstream
            return
        keys.check(facts.name)
        serving, t0 = facts.state is State.RUNNING, time.perf_counter()
        slot, facts = await self.sched.admit(facts, keep_alive)
        # Counted with in_flight, so the relaying gateway can tell its requests apart.
        relayed = (facts.name, hints.relayed) if hints.relayed else None
        if relayed is not None:
            self.balancer.relayed[relayed] += 1
        if tally is not None:
            tally.instance = facts.name
            tally.waited(time.perf_counter() - t0, loading=not serving)
        try:
            yield self._upstream(facts)
        finally:
            self.sched.release(slot)
            if relayed is not None:
                self.balancer.relayed[relayed] -= 1
                if self.balancer.relayed[relayed] <= 0:
                    del self.balancer.relayed[relayed]

    async def restarted(self, upstream: Upstream) -> Upstream | None:
        """Where to send a request again whose process failed before answering: its
        successor once it serves, or None when the process was not restarting."""
        if upstream.failover is not None:
            return await upstream.failover()
        if upstream.pid is None or not await self.sched.left(upstream.model.name, upstream.pid):
            return None
        log.info("gateway.resending", model=upstream.model.name, pid=upstream.pid)
        return self._upstream(await self.sched.running_again(upstream.model.name))

    def _upstream(self, facts: Facts) -> Upstream:
        return Upstream(
            server_url(facts.spec.probe_host, facts.spec.port, ""),
            dict(instance_auth(facts.spec)),
            self.views.view(facts),
            functools.partial(backend_for(facts.spec.kind).request_body, facts.spec),
            facts.pid,
        )

    async def unload(self, name: str) -> None:
        """Stop `name` (to IDLE) now, or once its requests in flight have ended."""
        facts = self.router.find(name)
        if facts is None:
            raise UnknownModel(name, self.router.names())
        await self.sched.unload(facts.name)

    def running(self, name: str) -> Upstream | None:
        """Where this host's model serves now, unleased (`GatewayPort.running`)."""
        facts = self.router.find(name)
        if facts is None or facts.state is not State.RUNNING:
            return None
        return self._upstream(facts)

    def load_progress(self, name: str) -> dict[str, Any] | None:
        """How far `name`'s load is (`progress.LoadProgress.of`), while it loads."""
        return self.views.load_progress(name)

    @asynccontextmanager
    async def _remote_lease(self, name: str) -> AsyncIterator[Upstream]:
        if self.fleet is None or not self.settings().fleet:
            raise self._unknown(name, self.router.names())
        picked = await self.fleet.pick(name)
        if isinstance(picked, list):
            if picked:
                hosts = ", ".join(e.peer.name for e in picked)
                raise Unavailable(f"model {name!r} is served by {hosts}, which does not answer")
            known = self.router.names() + [
                n for e, m in self.views.fleet_models() for n in (m.name, *m.aliases)
            ]
            raise self._unknown(name, known)
        entry, model = picked
        keys.check(model.name)
        if (tally := current_tally()) is not None:
            tally.instance, tally.host = model.name, entry.peer.name
        try:
            yield remote_upstream(entry, model, self.balancer.id)
        except UpstreamError as exc:
            # The peer went away since we last asked: say which host, and send the next
            # request elsewhere.
            self.fleet.mark_away(entry.peer.name, exc.message)
            raise Unavailable(f"model {name!r} on {entry.peer.name}: {exc.message}") from None

    def _unknown(self, name: str, known: list[str]) -> GatewayError:
        why = self.pending(name) if self.pending is not None else None
        return why if why is not None else UnknownModel(name, known)

    def status_of(self, name: str) -> dict[str, Any]:
        """The `gateway` object of an instance in the status document."""
        slot = self.sched.slot(name)
        facts = self.router.find(name)
        expires = slot.expires
        return {
            "routable": facts is not None,
            "aliases": list(facts.spec.aliases) if facts else [],
            "on_demand": bool(facts and facts.spec.on_demand),
            "idle_timeout_s": self.sched.timeout(name),
            "idle_left_s": None if expires is None else round(expires - time.monotonic(), 1),
            "in_flight": slot.in_flight,
            "queued": slot.waiting,
            "slots": backend_for(facts.spec.kind).serving(facts.spec).slots if facts else None,
            "relayed": {s: n for (i, s), n in self.balancer.relayed.items() if i == name},
            "estimate_bytes": memory.estimate(facts.spec) if facts else None,
            "footprint_bytes": slot.measured,
            "load_progress": self.load_progress(name),
            **self._rates.get(name, {}),
        }

    @property
    def _rates(self) -> dict[str, dict[str, Any]]:
        return model_rates(self.activity)

    def status(self) -> dict[str, Any]:
        """The daemon-wide `gateway` object: where it listens and the memory budget."""
        cfg = self.settings()
        live = [f for f in self.router.routable() if f.state in LIVE]
        used = sum(self.sched.size(f.name) or 0 for f in live)
        budget = cfg.memory_budget
        if budget == "auto":
            budget = memory.auto_budget(self.sched.slot(f.name).measured for f in live)
        return {
            "listen": f"{cfg.host}:{cfg.port}",
            "max_loaded": cfg.max_loaded,
            "memory_budget": cfg.memory_budget if cfg.memory_budget == "auto" else budget,
            "budget_bytes": budget,
            "used_bytes": used,
            "left_bytes": None if budget is None else budget - used,
            "keys": self.key_totals.to_dict(),
        }
