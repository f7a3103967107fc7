"""The balancer's own state: this gateway's requests on each peer replica, the prompt
affinity of each model, what its answers showed of its speed, and the requests waiting
for a free slot.

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
from dataclasses import dataclass, replace

from llamad.gateway.replicas.affinity import Affinity, Held, Key
from llamad.gateway.replicas.cache_pays import Option, expected_wait, soonest
from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.home import home
from llamad.gateway.replicas.rates import Rates
from llamad.gateway.replicas.replica import Replica, choose

POLL_S = 0.25  # a waiter also looks again this often: peers' counts change unseen
# Weight of a turn's reuse (tokens its server took from the cache over those expected)
# against the replica's reuse before: a server whose cache was taken by other
# conversations, or a model that reuses nothing, soon counts for what it gives.
REUSE_SMOOTHING = 0.5
# A prompt shorter than this never waits for the replica holding it: its cold prefill
# costs little anywhere, and a rate measured on a small model would trade a free slot
# for a held chat-template header (eight short chats all queued on one of two replicas).
MIN_WAIT_TOKENS = 256


@dataclass
class Waiting:
    """One request's choice to wait at the gateway for the replica holding its prompt,
    counted ahead of the next request that weighs that replica while it lasts."""

    key: Key | None = None

    def wait_for(self, key: Key | None) -> None:
        """It waits for `key` now (None: for none)."""
        self.key = key


class Balancer:
    """Marks on peer replicas, affinity maps and the wake-up of waiters."""

    def __init__(self, affinity_size: Callable[[], int] = lambda: 10000) -> None:
        self.affinity_size = affinity_size  # `[gateway] affinity_size`, followed on reload
        self.id = secrets.token_hex(6)  # this gateway, in the hop header it sends peers
        self.sent: Counter[Key] = Counter()  # our requests in flight on each peer replica
        self.relayed: Counter[tuple[str, str]] = Counter()  # (instance, sender): peers' here
        self.waiting: Counter[str] = Counter()  # requests waiting for a slot, by model
        self._maps: dict[str, Affinity] = {}
        self.rates = Rates()  # each model's prompt rate and request times, as answered
        self._reuse: dict[tuple[str, Key], float] = {}  # of the tokens expected, reused
        self.awaiting: Counter[Key] = Counter()  # requests waiting for each replica's cache
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
        hints: Hints,
        waiting: Waiting | None = None,
    ) -> Replica | None:
        """Choose a replica for a request (None: wait) and mark a peer's; the caller
        marks a local one in the same step. A request that chooses to wait for a
        replica's cache is marked in `waiting` until it picks again or `unwait`s.

        The replica whose server reported holding the longest prefix of the prompt is
        preferred while it has a free slot, else the conversation's home. When it is
        full and another is free, the request waits for it only where that is sooner
        than the free one's prefill of the whole prompt (`cache_pays.py`). A replica
        that failed keeps its prefixes: its prompt cache brings them back when it
        restarts, and until then it has no free slot."""
        self.unwait(waiting)  # its choice is made again, without counting itself
        seen = self.seen(replicas)
        held = self._held(model, hints)
        preferred = held.key if held is not None else None
        if preferred is None and hints.affinity and hints.conversation is not None:
            preferred = home(hints.conversation, (r.key for r in replicas))
        chosen = choose(seen, preferred)
        if chosen is None:
            return None
        if (
            held is not None
            and chosen.key != held.key
            and self._waits(model, seen, chosen, held, hints)
        ):
            if waiting is not None:
                waiting.wait_for(held.key)
                self.awaiting[held.key] += 1
            return None
        if not chosen.local:
            self.sent[chosen.key] += 1
        self._serial += 1
        self._picked[chosen.key] = self._serial
        return chosen

    def _waits(
        self, model: str, seen: Sequence[Replica], chosen: Replica, held: Held, hints: Hints
    ) -> bool:
        """The holder of the prompt's prefix is full: waiting for it beats `chosen`'s
        cold prefill (only a serving `chosen` is weighed, never a load to start)."""
        holder = next((r for r in seen if r.key == held.key), None)
        if holder is None or not chosen.ready or hints.tokens(held) < MIN_WAIT_TOKENS:
            return False
        speed = self.rates.seen(model)
        service, rate = (speed.service_s, speed.rate) if speed is not None else (None, None)
        options = [
            Option(chosen.key, 0.0, 0),
            Option(
                holder.key,
                expected_wait(holder, service, self.awaiting[holder.key]),
                self._reusable(model, held),
            ),
        ]
        return soonest(options, hints.tokens(held), rate) == holder.key

    def unwait(self, waiting: Waiting | None) -> None:
        """The request no longer waits for the replica it chose to wait for."""
        if waiting is None or waiting.key is None:
            return
        self.awaiting[waiting.key] -= 1
        if self.awaiting[waiting.key] <= 0:
            del self.awaiting[waiting.key]
        waiting.wait_for(None)

    def cached(self, model: str, hints: Hints, key: Key) -> int:
        """Of the request's prompt, the tokens `key`'s server is expected to reuse."""
        held = self._held(model, hints)
        return self._reusable(model, held) if held is not None and held.key == key else 0

    def _held(self, model: str, hints: Hints) -> Held | None:
        table = self._maps.get(model)
        if table is None or not hints.affinity or not hints.prefix:
            return None
        return table.lookup(hints.prefix)

    def _reusable(self, model: str, held: Held) -> int:
        """The held tokens, as far as that replica's reuse has borne such counts out."""
        return int(held.tokens * self._reuse.get((model, held.key), 1.0))

    def answered(
        self,
        model: str,
        hints: Hints,
        key: Key,
        expected: int,
        seconds: float,
        cached: int | None,
        evaluated: int | None,
        prompt_ms: float | None,
    ) -> None:
        """A request on `key` ended after holding its slot `seconds`; its server said it
        took `cached` prompt tokens from its cache and evaluated `evaluated` in
        `prompt_ms` (None: it did not say), where `expected` were thought held."""
        self.rates.answered(model, seconds, evaluated, prompt_ms)
        if evaluated is None:
            return  # an answer without counts says nothing of what the server holds
        if expected > 0 and cached is not None:
            was = self._reuse.get((model, key), 1.0)
            now = min(1.0, cached / expected)
            self._reuse[(model, key)] = was + REUSE_SMOOTHING * (now - was)
        if hints.prefix:
            self._map(model).reported(hints.chain, key, (cached or 0) + evaluated)

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
