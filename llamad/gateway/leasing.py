"""Leases on upstreams: where a relayed request goes, and where it goes again.

A request's model is resolved once here (`Lookup`): several replicas are balanced
(`replicas/`), a model only a `[fleet]` peer serves goes to that peer's gateway, and a
local one is admitted (`admission/`) and counted in flight while the lease is open.
Whether the caller may use the model was decided at the door (`access/door.py`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

import structlog

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.crashes import Crashes
from llamad.gateway.admission.scheduler import Scheduler
from llamad.gateway.contract.port import Asking, Upstream
from llamad.gateway.lookup import Lookup
from llamad.gateway.relay.upstreams import Upstreams
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.fleet_lease import FleetLease
from llamad.gateway.replicas.hints import hints_of
from llamad.gateway.replicas.lease import ReplicaLeases
from llamad.lifecycle.states import State

log = structlog.get_logger("llamad.gateway")


class Leases:
    """Leases on this host's instances, their replicas and the fleet's peers."""

    def __init__(
        self,
        lookup: Lookup,
        sched: Scheduler,
        replicas: ReplicaLeases,
        remote: FleetLease,
        crashes: Crashes,
        upstreams: Upstreams,
        balancer: Balancer,
        settings: Callable[[], GatewayConfig],
    ) -> None:
        self.lookup, self.router, self.sched = lookup, lookup.router, sched
        self.replicas, self.remote, self.crashes = replicas, remote, crashes
        self.upstreams, self.balancer, self.settings = upstreams, balancer, settings

    @asynccontextmanager
    async def lease(
        self, name: str, *, keep_alive: float | None = None, asking: Asking | None = None
    ) -> AsyncIterator[Upstream]:
        """Load `name` if needed and count it in flight while the context is open; a
        model only a `[fleet]` peer serves goes to that peer's gateway, unless `asking`
        (the door's decision) came relayed by one."""
        name = self.lookup.meant(name)
        tally = None if asking is None else asking.tally
        if tally is not None:
            tally.model = name
        name = self.lookup.choosers.resolve(name)  # a name that chooses: its choice now
        facts = self.router.find(name)
        hints = hints_of(asking)
        if self.replicas.several(name, peers=not hints.relayed):
            name = self.router.spelling(name)  # `Q` for `q`: one queue and balance per model
            if not self.settings().affinity:
                hints = replace(hints, affinity=False)
            async with self.replicas.lease(name, hints, keep_alive, tally) as upstream:
                yield upstream
            return
        if facts is None and hints.relayed:  # never relayed twice: no loops
            raise self.remote.unknown(name, self.router.names())
        if facts is None:
            async with self.remote.lease(name, tally) as upstream:
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
