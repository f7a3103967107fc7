"""A request for a model with several replicas: wait for a free slot at the gateway,
hold it while the answer flows, and move to another replica when one fails before its
first byte.

The choice and its mark are one synchronous step (`_try`): the balancer marks a peer's
replica, the scheduler a local one, with no await between the snapshot and the marks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

import structlog

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.rules import Slot
from llamad.gateway.admission.scheduler import Scheduler
from llamad.gateway.contract.port import (
    LoadFailed,
    QueueFull,
    QueueTimeout,
    Record,
    Unavailable,
    Upstream,
    UpstreamError,
)
from llamad.gateway.fleet.models import FleetModels
from llamad.gateway.replicas.affinity import Key
from llamad.gateway.replicas.balancer import Balancer, Waiting
from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.peer_upstream import remote_upstream
from llamad.gateway.replicas.replica import Replica
from llamad.gateway.replicas.snapshot import Seen, Snapshot
from llamad.supervise.facts import Facts

log = structlog.get_logger("llamad.gateway")


@dataclass
class Held:
    """The replica a request holds now, and the local slot it was admitted to."""

    replica: Replica
    upstream: Upstream
    slot: Slot | None = None
    released: bool = False
    relayed: tuple[str, str] | None = None  # (instance, sender) counted for the status
    expected: int = 0  # of the prompt, the tokens its server was thought to hold
    since: float = field(default_factory=time.perf_counter)  # when the slot was taken


class ReplicaLeases:
    """Leases on models served by several replicas."""

    def __init__(
        self,
        snapshot: Snapshot,
        sched: Scheduler,
        balancer: Balancer,
        fleet: Callable[[], FleetModels | None],
        settings: Callable[[], GatewayConfig],
        local_upstream: Callable[[Facts], Upstream],
    ) -> None:
        self.snapshot, self.sched, self.balancer = snapshot, sched, balancer
        self.fleet, self.settings, self.local_upstream = fleet, settings, local_upstream

    def several(self, name: str, peers: bool = True) -> bool:
        """`name` has more than one replica: the balanced lease serves it. Instances
        sharing an alias always do (even while some are stopped); peers count while
        they serve it (and `peers`: a relayed request stays on this llamad)."""
        if self.snapshot.router.sharing(name):
            return True
        fleet = self.fleet() if peers else None
        return (
            fleet is not None and bool(fleet.candidates(name)) and len(self.snapshot.of(name)) > 1
        )

    @asynccontextmanager
    async def lease(
        self, name: str, hints: Hints, keep_alive: float | None, tally: Record | None = None
    ) -> AsyncIterator[Upstream]:
        """Hold a slot on the best replica of `name` while the context is open, marked
        in the request's `tally`; a request another gateway relayed here stays on this
        llamad's replicas."""
        t0 = time.perf_counter()
        held = self._relayed(await self._take(name, hints, keep_alive, set()), hints, tally)
        if tally is not None:
            tally.waited(time.perf_counter() - t0, loading=not held.replica.ready)
        failed: set[Key] = set()

        async def failover() -> Upstream | None:
            nonlocal held
            failed.add(held.replica.key)
            self._away(name, held, "failed before answering")
            self._give_back(held)
            log.info("gateway.resending", model=name, replica="/".join(held.replica.key))
            held = self._relayed(await self._take(name, hints, keep_alive, failed), hints, tally)
            return replace(held.upstream, failover=None)  # once: then the failure stays

        try:
            yield replace(held.upstream, failover=failover)
            self._answered(name, hints, held, tally)
        except UpstreamError as exc:
            self._away(name, held, exc.message)
            raise
        finally:
            self._give_back(held)

    async def _take(
        self, name: str, hints: Hints, keep_alive: float | None, exclude: set[Key]
    ) -> Held:
        cfg, queued, skip = self.settings(), False, set(exclude)
        waiting = Waiting()  # marked while it waits for a replica's cache by choice
        try:
            async with asyncio.timeout(cfg.queue_timeout):
                while True:
                    seen = self.snapshot.of(name, skip, peers=hints.relayed is None)
                    if not seen:
                        raise Unavailable(f"model {name!r}: no replica answers")
                    held = self._try(name, seen, hints, keep_alive, waiting)
                    if isinstance(held, Held):
                        return held
                    if isinstance(held, Seen):  # a local one that loads: admission waits
                        try:
                            slot, facts = await self.sched.admit(held.target, keep_alive)  # type: ignore[arg-type]
                        except LoadFailed:
                            if len(seen) == 1:
                                raise
                            # A copy that cannot load (no memory, a bad file) is passed
                            # over: the request waits for the replicas that serve.
                            skip.add(held.replica.key)
                            continue
                        return Held(held.replica, self.local_upstream(facts), slot)
                    if not queued:
                        if self.balancer.waiting[name] >= cfg.max_queue:
                            raise QueueFull(
                                f"{cfg.max_queue} requests already wait for model {name!r}"
                            )
                        self.balancer.waiting[name] += 1
                        queued = True
                    await self.balancer.changed()
        except TimeoutError:
            raise QueueTimeout(
                f"no replica of model {name!r} was free within {cfg.queue_timeout:g}s"
            ) from None
        finally:
            self.balancer.unwait(waiting)
            if queued:
                self.balancer.waiting[name] -= 1

    def _try(
        self,
        name: str,
        seen: dict[Key, Seen],
        hints: Hints,
        keep_alive: float | None,
        waiting: Waiting,
    ) -> Held | Seen | None:
        """Choose and mark, in one step: Held, a cold local replica to load, or None."""
        replicas = [s.replica for s in seen.values()]
        chosen = self.balancer.pick(name, replicas, hints, waiting)
        if chosen is None:
            return None
        target = seen[chosen.key].target
        expected = self.balancer.cached(name, hints, chosen.key)
        if isinstance(target, Facts):
            if not chosen.ready:
                return seen[chosen.key]
            slot = self.sched.slot(target.name)
            facts = self.sched.try_admit(slot, keep_alive)
            assert facts is not None, "a ready replica admits"  # read in this same step
            return Held(chosen, self.local_upstream(facts), slot, expected=expected)
        entry, model = target
        return Held(chosen, remote_upstream(entry, model, self.balancer.id), expected=expected)

    def _answered(self, name: str, hints: Hints, held: Held, tally: Record | None) -> None:
        """The request's answer has ended: what its server said of the prompt (the
        tokens it reused and evaluated, how fast) goes to the balancer."""
        usage = tally.usage if tally is not None else None
        self.balancer.answered(
            name,
            hints,
            held.replica.key,
            held.expected,
            time.perf_counter() - held.since,
            usage.cached_tokens if usage is not None else None,
            usage.evaluated_tokens if usage is not None else None,
            usage.prompt_ms if usage is not None else None,
        )

    def _relayed(self, held: Held, hints: Hints, tally: Record | None) -> Held:
        """Mark where the request went in its tally; count a relayed request on its
        instance, as the plain lease does."""
        if tally is not None:
            tally.instance = held.replica.instance
            tally.host = None if held.replica.local else held.replica.host
        if hints.relayed is not None:
            held.relayed = (held.replica.instance, hints.relayed)
            self.balancer.relayed[held.relayed] += 1
        return held

    def _give_back(self, held: Held) -> None:
        if held.released:
            return
        held.released = True
        if held.relayed is not None:
            self.balancer.unrelayed(held.relayed)
        if held.slot is not None:
            self.sched.release(held.slot)
        self.balancer.done(held.replica)

    def _away(self, name: str, held: Held, why: str) -> None:
        fleet = self.fleet()
        if fleet is not None and not held.replica.local and held.replica.host:
            fleet.mark_away(held.replica.host, why)
