"""A replica, as the balancer sees it at one instant, and the pure rule that picks one.

Every count here is a snapshot taken in the same synchronous step as the choice and its
mark (balancer.py), so two requests can never both take a replica's last free slot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

LOCAL = "local"  # the host name of this llamad's own replicas


@dataclass(frozen=True)
class Replica:
    """One target serving a model: this llamad's instance or a peer's gateway."""

    host: str  # LOCAL, or the `[fleet]` peer's name
    instance: str  # the instance name (local) or the model name the peer routes
    slots: int  # requests it serves at once (llama-server's parallel slots)
    busy: int  # requests it serves now, as far as this gateway knows
    queued: int = 0  # requests waiting there (a peer's own queue)
    ready: bool = True  # it serves now; False: idle or loading (on demand)
    loading: bool = False  # a load is under way, started by us or by its host
    memory_left: int = 0  # the host's memory budget left (placement of a cold model)
    ours: int = 0  # a peer's: of its `busy`, the requests we had sent when it said so
    last_pick: int = 0  # when the balancer last chose it (a serial number; 0: never)
    spare: bool = False  # a local on-demand replica at rest: started when the others are full
    # A peer's beside this llamad's own replicas: the slots it counts for until they are
    # full (their largest count), so no claim of slots draws their requests away; its
    # slots beyond take what they cannot. None: no cap.
    slots_cap: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What marks and affinity remember it by."""
        return (self.host, self.instance)

    @property
    def free(self) -> int:
        """Slots free now (never negative), as if it had no more than `slots_cap`."""
        slots = self.slots if self.slots_cap is None else min(self.slots, self.slots_cap)
        return max(0, slots - self.busy) if self.ready else 0

    @property
    def room(self) -> int:
        """Slots free now whatever the cap."""
        return max(0, self.slots - self.busy) if self.ready else 0

    @property
    def local(self) -> bool:
        """Served by this llamad."""
        return self.host == LOCAL


def choose(replicas: Sequence[Replica], preferred: tuple[str, str] | None = None) -> Replica | None:
    """The replica a request goes to now, or None: it waits at the gateway.

    - `preferred` (the prompt's affinity) wins while it has a free slot;
    - else the replica with a free slot and the least queued work; this llamad's own
      wins a tie, so local is preferred only when it has a free slot; among peers, the
      one chosen least recently (idle replicas take new conversations in turn); a peer
      beside local replicas counts as no bigger than the largest of them until no
      replica has a free slot (`slots_cap`);
    - when every serving replica is full and none loads, a spare local replica (on
      demand, at rest) starts for the request; else it waits for a slot;
    - with no replica serving yet, one already loading takes the request (N cold
      requests start one copy; a local one takes as many as its slots, and the rest
      wait); else the cold one with the most memory left, local first.
    """
    # A capped peer's slots beyond its cap are used once no replica has a free one.
    chosen = _free(replicas, preferred, attrgetter("free")) or _free(
        replicas, preferred, attrgetter("room")
    )
    if chosen is not None:
        return chosen
    if any(r.ready for r in replicas):
        # All full: wait for a slot rather than queue on a busy server, unless a spare
        # can start (one at a time: the waiters take its slots once it serves).
        if any(r.loading for r in replicas):
            return None
        return next((r for r in replicas if r.spare), None)
    # A local copy that loads takes as many as it has slots; the rest wait here, to take
    # whichever replica frees first (a peer's queue is its own).
    loading = [r for r in replicas if r.loading]
    if loading:
        room = [r for r in loading if not r.local or r.busy + r.queued < r.slots]
        return min(room, key=lambda r: (r.busy, not r.local)) if room else None
    cold = list(replicas)
    return max(cold, key=lambda r: (r.local, r.memory_left)) if cold else None


def _free(
    replicas: Sequence[Replica], preferred: tuple[str, str] | None, free: Callable[[Replica], int]
) -> Replica | None:
    """The preferred replica if it has a free slot, else the one with the least queued
    work and the most free slots, local on a tie, then the one chosen least recently."""
    pool = [r for r in replicas if free(r) > 0]
    for r in pool:
        if r.key == preferred:
            return r
    return min(pool, key=lambda r: (r.queued, -free(r), not r.local, r.last_pick), default=None)
