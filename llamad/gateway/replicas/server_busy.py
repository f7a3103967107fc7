"""What each local replica's own server says it is running, read in the background.

A client may talk to an instance's own port, past the gateway: the gateway's in-flight
count then misses that work. For local instances that are replicas (an alias several
share) and whose server lists its slots (llama-server's `/slots`, on by default and
behind the instance's key), a refresher reads every READ_S how many slots are processing
and how many there are, with the gateway's own in-flight count at that moment. The
balancer applies the peer rule to it (`counted`); a reading older than STALE_S, or a
read that failed (a server still loading answers 503), is ignored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from llamad.backends.probes import server_url
from llamad.backends.registry import backend_for
from llamad.gateway.relay.instance_auth import instance_auth
from llamad.gateway.replicas.replica import Replica
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

READ_S = 0.5  # how often each replica's server is asked
STALE_S = 2.0  # a reading older than this says nothing about now
TIMEOUT_S = 1.0  # a wedged server's /slots may hang: give up, the reading goes stale


@dataclass(frozen=True)
class Reading:
    """One answer of a server: slots processing, slots in all, and ours in flight then."""

    processing: int
    slots: int
    ours: int
    at: float  # monotonic time of the answer


def counted(r: Replica, reading: Reading | None, now: float) -> Replica:
    """`r` (busy = the gateway's own in-flight count) as busy as its server said, less
    ours it counted then, plus ours in flight now; never less busy than ours alone.
    A missing or stale reading leaves `r` as it is."""
    if reading is None or now - reading.at > STALE_S:
        return r
    busy = max(r.busy, max(0, reading.processing - reading.ours) + r.busy)
    return replace(r, busy=busy, slots=reading.slots or r.slots)


def parse_slots(doc: Any) -> tuple[int, int] | None:
    """(processing, slots) from a `/slots` answer, or None when it is not a slot list."""
    if not isinstance(doc, list) or not all(isinstance(s, dict) for s in doc):
        return None
    return sum(1 for s in doc if s.get("is_processing") is True), len(doc)


class ServerBusy:
    """Owns the readings; `run` refreshes them while local replicas run."""

    def __init__(
        self,
        routable: Callable[[], list[Facts]],
        in_flight: Callable[[str], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.routable, self.in_flight, self.clock = routable, in_flight, clock
        self.readings: dict[str, Reading] = {}
        self.rounds = 0  # rounds of reads finished, answered or not

    def reading(self, name: str) -> Reading | None:
        """The last reading of instance `name`, fresh or not (`counted` judges)."""
        return self.readings.get(name)

    def targets(self) -> list[Facts]:
        """The running local instances that share an alias and whose server says."""
        facts = self.routable()
        names = [a for f in facts for a in set(f.spec.aliases)]
        return [
            f
            for f in facts
            if f.state is State.RUNNING
            and any(names.count(a) > 1 for a in f.spec.aliases)
            and backend_for(f.spec.kind).serving(f.spec).busy_path is not None
        ]

    async def run(self) -> None:
        """Read every replica's server each READ_S, for as long as the gateway runs."""
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            while True:
                targets = self.targets()
                live = {f.name for f in targets}
                for name in [n for n in self.readings if n not in live]:
                    del self.readings[name]
                async with asyncio.TaskGroup() as group:
                    for facts in targets:
                        group.create_task(self._read(client, facts))
                self.rounds += 1
                await asyncio.sleep(READ_S)

    async def _read(self, client: httpx.AsyncClient, facts: Facts) -> None:
        path = backend_for(facts.spec.kind).serving(facts.spec).busy_path
        spec = facts.spec
        before = self.in_flight(facts.name)
        try:
            reply = await client.get(
                server_url(spec.probe_host, spec.port, path or ""),
                headers=dict(instance_auth(spec)),
            )
            found = parse_slots(reply.json()) if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            found = None
        if found is None:
            return  # the last reading ages out
        # A request of ours that began during the read may or may not be in the count:
        # take the larger, so another client's work is never counted twice.
        ours = max(before, self.in_flight(facts.name))
        self.readings[facts.name] = Reading(found[0], found[1], ours, self.clock())
