"""Every replica of a model name as this instant sees it: this llamad's instances that
answer to it, and the reachable peers that route it."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from llamad.backends.registry import backend_for
from llamad.gateway.admission.slots import Slots
from llamad.gateway.fleet.models import FleetModels, PeerModels
from llamad.gateway.fleet.peer_models import RemoteModel
from llamad.gateway.models.router import Router
from llamad.gateway.replicas.affinity import Key
from llamad.gateway.replicas.replica import LOCAL, Replica
from llamad.gateway.replicas.server_busy import ServerBusy, counted
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

Target = Facts | tuple[PeerModels, RemoteModel]


@dataclass(frozen=True)
class Seen:
    """One replica and what a request to it needs."""

    replica: Replica
    target: Target


class Snapshot:
    """Reads replicas from the router, the slots, the servers' own counts and the fleet,
    without waiting."""

    def __init__(
        self,
        router: Router,
        slots: Slots,
        fleet: Callable[[], FleetModels | None],
        busy: ServerBusy | None = None,
    ) -> None:
        self.router, self.slots, self.fleet, self.busy = router, slots, fleet, busy

    def of(self, name: str, exclude: Collection[Key] = (), peers: bool = True) -> dict[Key, Seen]:
        """Every replica of `name` but those in `exclude`, by key (this llamad's alone
        without `peers`)."""
        out = {}
        for facts in self.router.find_all(name):
            seen = self._local(facts)
            if seen is not None and seen.replica.key not in exclude:
                out[seen.replica.key] = seen
        fleet = self.fleet() if peers else None
        # Beside local replicas, a peer counts for no more slots than the largest of them
        # until they are full: what it claims decides among peers, not whether ours work.
        cap = max((s.replica.slots for s in out.values()), default=None)
        for entry, model in fleet.candidates(name) if fleet is not None else []:
            r = Replica(
                host=entry.peer.name,
                instance=model.name,
                slots=model.slots,
                busy=model.in_flight,
                queued=model.queued,
                ready=model.loaded,
                loading=model.state == State.STARTING.value,
                memory_left=entry.left_bytes or 0,
                ours=model.ours,
                slots_cap=cap,
            )
            if r.key not in exclude and r.key not in out:
                out[r.key] = Seen(r, (entry, model))
        return out

    def _local(self, facts: Facts) -> Seen | None:
        slot = self.slots.slot(facts.name)
        running = facts.state is State.RUNNING
        starting = facts.state is State.STARTING or slot.load is not None or slot.waiting > 0
        if not (running or starting or facts.spec.on_demand):
            return None  # stopped or failed, and nothing will start it for a request
        r = Replica(
            host=LOCAL,
            instance=facts.name,
            slots=backend_for(facts.spec.kind).serving(facts.spec).slots,
            busy=slot.in_flight,
            queued=slot.waiting,
            ready=running and slot.admits and not facts.closing,
            loading=starting,
            memory_left=0,
            spare=facts.spec.on_demand and not (running or starting),
        )
        if self.busy is not None and running:
            r = counted(r, self.busy.reading(facts.name), self.busy.clock())
        return Seen(r, facts)
