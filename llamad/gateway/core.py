"""The gateway: leases on upstreams, restarts and unloads, over the supervisor.

Listings and status are built apart (`catalog.py`, `status_doc.py`); a relayed
request resolves its model once, in `lease`, and carries the name on its `Upstream`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
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
from llamad.gateway.books.activity_metrics import ActivityMetrics
from llamad.gateway.books.activity_stats import KeyTotals
from llamad.gateway.books.bus import EventBus
from llamad.gateway.books.metrics import GatewayMetrics
from llamad.gateway.books.recent_stops import RecentStops
from llamad.gateway.books.slot_growth import Grown, SlotGrowth
from llamad.gateway.catalog import Views
from llamad.gateway.choosers import Choosers
from llamad.gateway.contract.caller import Caller
from llamad.gateway.contract.port import Asking, GatewayError, ModelView, UnknownModel, Upstream
from llamad.gateway.fleet.models import FleetModels
from llamad.gateway.leasing import Leases
from llamad.gateway.lookup import Lookup
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.router import Router
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.gateway.relay.upstreams import Upstreams
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.fleet_lease import FleetLease
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
        self.settings = settings
        self.fleet = fleet
        self.router = Router(supervisor)
        self.bus = EventBus()
        self.progress = LoadProgress()
        self.recent_stops = RecentStops()
        notes = BusNotes(
            self.bus, self.progress, lambda name: self.sched.size(name), self.recent_stops
        )
        self.metrics = metrics or GatewayMetrics()
        slots = Slots()
        # Without a book the gateway counts RAM alone (no llama-server to list devices).
        self.ledger = Ledger(supervisor, slots, settings, devices or DeviceBook(lambda: None))
        self.sets = ModelSets(supervisor, settings)
        loads = Loads(supervisor, slots, settings, self.metrics, notes, self.ledger, self.sets)
        self.sched = Scheduler(supervisor, settings, slots, loads)
        self.idle = IdleTimers(self.sched)
        self.metrics.watch(self.sched.counts)
        self.created = int(time.time())
        self.upstreams = Upstreams(self._pid_of)
        # Shared with the fleet, which reads our counts on a peer as its status arrives.
        self.balancer = balancer or Balancer(lambda: settings().affinity_size)
        self.views = Views(self.router, self.sched, self.idle, self.progress, self._fleet)
        self.choosers = Choosers(self.router, self.views, self.sets)
        self.lookup = Lookup(self.router, self.views, self.choosers)
        # What each local replica's server says it runs, past the gateway too.
        self.busy = ServerBusy(self.router.routable, lambda name: self.sched.slot(name).in_flight)
        replicas = ReplicaLeases(
            Snapshot(self.router, slots, self._fleet, self.busy),
            self.sched,
            self.balancer,
            self._fleet,
            settings,
            self.upstreams.of,
        )
        remote = FleetLease(fleet, settings, self.router, pending, self.balancer.id)
        crashes = Crashes(supervisor, settings)
        self.leases = Leases(
            self.lookup, self.sched, replicas, remote, crashes, self.upstreams, self.balancer,
            settings,
        )  # fmt: skip
        # Per-request activity: the ring, the live stream, Prometheus and usage per key.
        self.key_totals = KeyTotals()
        # What a request added to its slots, for the prompt cache's background saves.
        growth: list[Listener] = [] if saves is None else [SlotGrowth(saves)]
        books: list[Listener] = [ActivityMetrics(self.metrics.registry), self.key_totals]
        listeners = [*books, self._announce, *growth]
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
            self.recent_stops,
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

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (`Lookup.find`), or None."""
        return self.lookup.find(name)

    def instances(self, name: str) -> tuple[str, ...] | None:
        """The instances `name` means, what a key's scope is checked against
        (`Lookup.instances`)."""
        return self.lookup.instances(name)

    def lease(
        self, name: str, *, keep_alive: float | None = None, asking: Asking | None = None
    ) -> AbstractAsyncContextManager[Upstream]:
        """Load `name` if needed and count it in flight while the context is open
        (`Leases.lease`)."""
        return self.leases.lease(name, keep_alive=keep_alive, asking=asking)

    async def restarted(self, upstream: Upstream) -> Upstream | None:
        """Where to send a request again whose process failed before answering
        (`Leases.restarted`)."""
        return await self.leases.restarted(upstream)

    async def unload(self, name: str) -> None:
        """Stop `name` (to IDLE) now, or once its requests in flight have ended; an
        alias several instances share stops every one of them."""
        name = self.lookup.resolve(name)
        found: list[Facts | None] = [*self.router.sharing(name)] or [self.router.find(name)]
        for facts in found:
            if facts is None:
                raise UnknownModel(name, self.router.names())
            await self.sched.unload(facts.name)

    def running(self, name: str) -> Upstream | None:
        """Where this host's model serves now, unleased (`GatewayPort.running`): the
        first replica that serves, for an alias several instances share."""
        name = self.lookup.resolve(name)
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

    def requests(self, name: str | None = None) -> int:
        """Requests of instance `name` in flight or waiting for it to load or for room, or
        when None every request, those relayed to fleet peers too: the daemon keeps the
        machine awake, and a busy server's slow probe is not a hung one, while any are."""
        counts = self.sched.counts()
        if name is not None:
            return sum(counts.get(name, (0, 0)))
        local = sum(a + b for a, b in counts.values())
        peers = self.leases.remote.relaying + self.balancer.sent.total()
        return local + peers + self.balancer.waiting.total()

    def status(self) -> dict[str, Any]:
        """The daemon-wide `gateway` object: where it listens and the memory budget."""
        return self.status_doc.daemon()
