"""The gateway: leases on upstreams, restarts and unloads, over the supervisor.

Listings and status are built apart (`catalog.py`, `status_doc.py`); a relayed
request resolves its model once, in `lease`, and carries the name on its `Upstream`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any

import structlog

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.crashes import Crashes
from llamad.gateway.admission.devices.book import DeviceBook
from llamad.gateway.admission.devices.ledger import Ledger
from llamad.gateway.admission.drain import drain
from llamad.gateway.admission.idle import IdleTimers
from llamad.gateway.admission.loads import Loads
from llamad.gateway.admission.notes import BusNotes
from llamad.gateway.admission.progress import LoadProgress
from llamad.gateway.admission.scheduler import Scheduler
from llamad.gateway.admission.slots import Slots
from llamad.gateway.admission.state_watch import StateWatch
from llamad.gateway.books.activity import Activity, Listener, Record
from llamad.gateway.books.activity import current as current_tally
from llamad.gateway.books.activity_metrics import ActivityMetrics
from llamad.gateway.books.activity_stats import KeyTotals
from llamad.gateway.books.bus import EventBus
from llamad.gateway.books.metrics import GatewayMetrics
from llamad.gateway.books.slot_growth import Grown, SlotGrowth
from llamad.gateway.catalog import Views
from llamad.gateway.choosers import Choosers
from llamad.gateway.contract.caller import Caller
from llamad.gateway.contract.port import GatewayError, ModelView, UnknownModel, Upstream
from llamad.gateway.fleet.models import FleetModels
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.router import Router
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.gateway.models.tags import meant
from llamad.gateway.relay.upstreams import Upstreams
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.fleet_lease import FleetLease
from llamad.gateway.replicas.hints import current as current_hints
from llamad.gateway.replicas.lease import ReplicaLeases
from llamad.gateway.replicas.server_busy import ServerBusy
from llamad.gateway.replicas.snapshot import Snapshot
from llamad.gateway.status_doc import StatusDoc
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

log = structlog.get_logger("llamad.gateway")


class Gateway:
    """Implements `port.GatewayPort` over the supervisor."""

    def __init__(
        self,
        supervisor: SupervisorView,
        settings: Callable[[], GatewayConfig],
        metrics: GatewayMetrics | None = None,
        fleet: FleetModels | None = None,
        pending: Callable[[str], GatewayError | None] | None = None,
        balancer: Balancer | None = None,
        devices: DeviceBook | None = None,
        saves: Grown | None = None,
    ) -> None:
        """`saves` learns what each request added to its instance's slots (the prompt
        cache's background saves)."""
        self.settings = settings
        self.fleet = fleet
        self.router = Router(supervisor)
        self.bus = EventBus()
        self.progress = LoadProgress()
        notes = BusNotes(self.bus, self.progress, lambda name: self.sched.size(name))
        self.metrics = metrics or GatewayMetrics()
        slots = Slots()
        # Without a book the gateway counts RAM alone (no llama-server to list devices).
        self.ledger = Ledger(supervisor, slots, settings, devices or DeviceBook(lambda: None))
        self.sets = ModelSets(supervisor, settings)
        loads = Loads(supervisor, slots, settings, self.metrics, notes, self.ledger, self.sets)
        self.sched = Scheduler(supervisor, settings, slots, loads)
        self.crashes = Crashes(supervisor, settings)
        self.idle = IdleTimers(self.sched)
        self.metrics.watch(self.sched.counts)
        self.created = int(time.time())
        self.upstreams = Upstreams(self._pid_of)
        # Shared with the fleet, which reads our counts on a peer as its status arrives.
        self.balancer = balancer or Balancer(lambda: settings().affinity_size)
        self.remote = FleetLease(fleet, settings, self.router, pending, self.balancer.id)
        self.views = Views(self.router, self.sched, self.idle, self.progress, self._fleet)
        self.choosers = Choosers(self.router, self.views, self.sets)
        # What each local replica's server says it runs, past the gateway too.
        self.busy = ServerBusy(self.router.routable, lambda name: self.sched.slot(name).in_flight)
        self.replicas = ReplicaLeases(
            Snapshot(self.router, slots, self._fleet, self.busy),
            self.sched,
            self.balancer,
            self._fleet,
            settings,
            self.upstreams.of,
        )
        # Per-request activity: the ring, the live stream, Prometheus and usage per key.
        self.key_totals = KeyTotals()
        listeners: list[Listener] = [
            ActivityMetrics(self.metrics.registry),
            self.key_totals,
            self._announce,
        ]
        if saves is not None:
            listeners.append(SlotGrowth(saves))
        self.activity = Activity(lambda: self.settings().activity_size, listeners)
        self.watch = StateWatch(supervisor, self.bus, self.progress, self.sched.size)
        self.status_doc = StatusDoc(
            settings,
            self.router,
            self.sched,
            self.views,
            self.activity,
            self.key_totals,
            self.balancer,
            self.busy,
            self.ledger,
            self.sets,
        )
        self.metrics.watch_devices(self.status_doc.devices)

    def _pid_of(self, name: str) -> int | None:
        facts = self.router.sup.facts(name)
        return None if facts is None else facts.pid

    def _fleet(self) -> FleetModels | None:
        """The fleet's models while `[gateway] fleet` is on, else None."""
        return self.fleet if self.fleet is not None and self.settings().fleet else None

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        """The drain around a reload's or a restart's stops and starts
        (the supervisor's `draining`)."""
        return drain(self.sched, removed, changed)

    async def run(self) -> None:
        """The idle ticker, and the devices' listing beside it (a slow one holds no idle
        stop back); cancel to stop, then `close()`."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.ledger.discover(self.sched.loads.running))
            await self.idle.run()

    async def close(self) -> None:
        """Cancel loads and stops under way; end the live streams."""
        self.bus.close()
        await self.sched.close()

    def _announce(self, record: Record) -> None:
        if self.bus.subscribers:  # no dict to build when nobody reads
            self.bus.publish("request", record.to_dict())

    # The port --------------------------------------------------------------------

    def models(self, caller: Caller) -> list[ModelView]:
        """Every routable model `caller` may use, never waiting on a load: this host's,
        then the fleet's that no local name shadows."""
        found = [*self.views.all(), *self.choosers.all()]
        return [v for v in found if caller.may_use_all(v.instances or (v.name,))]

    def meant(self, name: str) -> str:
        """The name a request for `name` resolves by (`tags.meant`: `m:latest` is `m`)."""
        return meant(name, lambda n: self._find(n) is not None)

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (instance name, alias or a name that chooses; `:latest`
        or not), or None; an alias several instances share is one model (`Views.shared`)."""
        return self._find(self.meant(name))

    def _find(self, name: str) -> ModelView | None:
        if chosen := self.choosers.view(name):
            return chosen
        if found := self.router.sharing(name):
            return self.views.shared(self.router.spelling(name), found)
        facts = self.router.find(name)
        if facts is not None:
            return self.views.local(facts)
        return next((v for v in self.views.all() if name in (v.name, *v.aliases)), None)

    def instances(self, name: str) -> tuple[str, ...] | None:
        """The instances (or the fleet peer's model) `name` means, as `find` resolves it,
        without making its view: what a key's list is checked against (a name that
        chooses is itself)."""
        name = self.meant(name)
        if (chooser := self.choosers.named(name)) is not None:
            return (chooser,)
        if found := self.router.sharing(name):
            return tuple(f.name for f in found)
        if (facts := self.router.find(name)) is not None:
            return (facts.name,)
        view = self.find(name)
        return None if view is None else view.instances or (view.name,)

    @asynccontextmanager
    async def lease(self, name: str, *, keep_alive: float | None = None) -> AsyncIterator[Upstream]:
        """Load `name` if needed and count it in flight while the context is open; a
        model only a `[fleet]` peer serves goes to that peer's gateway. Whether the
        caller may use `name` was decided at the door (`access/door.py`)."""
        name = self.meant(name)
        tally = current_tally()
        if tally is not None:
            tally.model = name
        name = self.choosers.resolve(name)  # a name that chooses: its choice now
        facts = self.router.find(name)
        hints = current_hints()
        if self.replicas.several(name, peers=not hints.relayed):
            name = self.router.spelling(name)  # `Q` for `q`: one queue and balance per model
            if not self.settings().affinity:
                hints = replace(hints, affinity=False)
            async with self.replicas.lease(name, hints, keep_alive) as upstream:
                yield upstream
            return
        if facts is None and hints.relayed:  # never relayed twice: no loops
            raise self.remote.unknown(name, self.router.names())
        if facts is None:
            async with self.remote.lease(name) as upstream:
                yield upstream
            return
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
            yield self.upstreams.of(facts)
        finally:
            self.sched.release(slot)
            if relayed is not None:
                self.balancer.unrelayed(relayed)

    async def restarted(self, upstream: Upstream) -> Upstream | None:
        """Where to send a request again whose process failed before answering: its
        successor once it serves (another replica's, for a model several serve), or None
        when the process was not restarting."""
        if upstream.failover is not None:
            return await upstream.failover()
        pid = upstream.pid
        if pid is None or not await self.crashes.left(upstream.name, pid):
            return None
        log.info("gateway.resending", model=upstream.name, pid=pid)
        return self.upstreams.of(await self.crashes.running_again(upstream.name, pid))

    async def unload(self, name: str) -> None:
        """Stop `name` (to IDLE) now, or once its requests in flight have ended; an
        alias several instances share stops every one of them."""
        name = self.choosers.resolve(self.meant(name))
        found: list[Facts | None] = [*self.router.sharing(name)] or [self.router.find(name)]
        for facts in found:
            if facts is None:
                raise UnknownModel(name, self.router.names())
            await self.sched.unload(facts.name)

    def running(self, name: str) -> Upstream | None:
        """Where this host's model serves now, unleased (`GatewayPort.running`): the
        first replica that serves, for an alias several instances share."""
        name = self.choosers.resolve(self.meant(name))
        found: list[Facts | None] = [*self.router.sharing(name)] or [self.router.find(name)]
        facts = next((f for f in found if f is not None and f.state is State.RUNNING), None)
        return None if facts is None else self.upstreams.of(facts)

    # Status ----------------------------------------------------------------------

    def load_progress(self, name: str) -> dict[str, Any] | None:
        """How far `name`'s load is (`progress.LoadProgress.of`), while it loads."""
        return self.views.load_progress(name)

    def status_of(self, name: str) -> dict[str, Any]:
        """The `gateway` object of an instance in the status document."""
        return self.status_doc.of(name)

    def status(self) -> dict[str, Any]:
        """The daemon-wide `gateway` object: where it listens and the memory budget."""
        return self.status_doc.daemon()
