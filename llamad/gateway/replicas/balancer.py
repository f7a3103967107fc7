"""The balancer's own state: this gateway's requests on each peer replica, the prompt
affinity of each model, and the requests waiting for a free slot.

A peer's status document is up to REFRESH_S old, so the gateway counts what it sent
there itself: a peer is as busy as it said, less those of ours it counted then (its
`relayed` count under our id), plus ours in flight now. Every method is synchronous: a choice
and its mark are one step of the event loop (the admission rules).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from llamad.gateway.replicas.affinity import Affinity, Key
from llamad.gateway.replicas.home import home
from llamad.gateway.replicas.replica import Replica, choose

POLL_S = 0.25  # a waiter also looks again this often: peers' counts change unseen


class Balancer:
    """Marks on peer replicas, affinity maps and the wake-up of waiters."""

    def __init__(self, affinity_size: Callable[[], int] = lambda: 10000) -> None:
        self.affinity_size = affinity_size  # `[gateway] affinity_size`, followed on reload
        self.id = secrets.token_hex(6)  # this gateway, in the hop header it sends peers
        self.sent: Counter[Key] = Counter()  # our requests in flight on each peer replica
        self.relayed: Counter[tuple[str, str]] = Counter()  # (instance, sender): peers' here
        self.waiting: Counter[str] = Counter()  # requests waiting for a slot, by model
        self._maps: dict[str, Affinity] = {}
        self._picked: dict[Key, int] = {}  # the serial of each replica's last choice
        self._serial = 0
        self._changed = asyncio.Event()

    def unrelayed(self, key: tuple[str, str]) -> None:
        """A request a peer relayed here (instance, sender) has ended."""
        self.relayed[key] -= 1
        if self.relayed[key] <= 0:
            del self.relayed[key]

    def seen(self, replicas: Sequence[Replica]) -> list[Replica]:
        """Peer replicas as busy as they said, less what we had sent when they said it,
        plus what we have sent since."""
        return [
            replace(r if r.local else self._counted(r), last_pick=self._picked.get(r.key, 0))
            for r in replicas
        ]

    def _counted(self, r: Replica) -> Replica:
        sent = self.sent[r.key]
        loading = r.loading or (sent > 0 and not r.ready)
        return replace(r, busy=max(0, r.busy - r.ours) + sent, loading=loading)

    def pick(
        self,
        model: str,
        replicas: Sequence[Replica],
        prefix: Sequence[bytes],
        affinity: bool,
        conversation: bytes | None = None,
    ) -> Replica | None:
        """Choose a replica for a request (None: wait) and remember its prefix there.
        A peer's is marked here; the caller marks a local one in the same step.

        The replica that last served the longest prefix is preferred, else the
        conversation's home. A replica that failed keeps its prefixes: its prompt cache
        brings them back when it restarts, and until then it has no free slot."""
        table = self._maps.get(model)
        found = table.lookup(prefix) if table is not None and affinity and prefix else None
        preferred = found[0] if found else None
        if preferred is None and affinity and conversation is not None:
            preferred = home(conversation, (r.key for r in replicas))
        chosen = choose(self.seen(replicas), preferred)
        if chosen is None:
            return None
        if not chosen.local:
            self.sent[chosen.key] += 1
        self._serial += 1
        self._picked[chosen.key] = self._serial
        if prefix:
            self._map(model).served(prefix, chosen.key)
        return chosen

    def done(self, replica: Replica) -> None:
        """A request on `replica` ended (or left it for another): wake the waiters."""
        if not replica.local:
            self.sent[replica.key] -= 1
            if self.sent[replica.key] <= 0:
                del self.sent[replica.key]
        self.poke()

    def _map(self, model: str) -> Affinity:
        table, size = self._maps.get(model), self.affinity_size()
        if table is None or table.size != size:  # a reload resized it: start afresh
            table = self._maps[model] = Affinity(size)
        return table

    def poke(self) -> None:
        """A slot freed up, or a replica came or went: whoever waits looks again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        """Wait for the next poke, at most POLL_S."""
        event = self._changed
        try:
            async with asyncio.timeout(POLL_S):
                await event.wait()
        except TimeoutError:
            pass
