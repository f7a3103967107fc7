"""Per-request activity: one record per request the gateway served, in a bounded ring.

A request's `Tally` is made by the door (`access/door.py`) as it lets the request in,
and travels in a context variable, so the lease (which knows the model, the instance and
the waits) and the relay (which knows the status, the first byte and the usage) can each
fill in their part without being handed it. Records hold timings and counts, never a
prompt or a completion.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from llamad.gateway.books.usage import NONE, Usage


@dataclass(slots=True)  # not frozen: a frozen init costs more than the rest of a record
class Record:
    """One finished request (never changed once made)."""

    time: float  # wall-clock epoch seconds when it arrived
    model: str  # the name asked for
    instance: str | None  # the instance (or the peer's model) that served it
    host: str | None  # the `[fleet]` peer it was relayed to; None: this host
    route: str
    status: int  # 499: the client left first
    client: str | None
    key: str | None  # the key's name, never the key
    queue_s: float
    load_s: float
    ttfb_s: float | None
    ttft_s: float | None  # to the first byte of the body (the first token of a stream)
    duration_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    tokens_per_s: float | None
    prompt_cached: int | None  # of prompt_tokens, those taken from the prompt cache
    prompt_evaluated: int | None  # of prompt_tokens, those evaluated

    @property
    def peer(self) -> bool:
        """Relayed to a peer."""
        return self.host is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `/v1/activity` and the `request` event."""
        out = {name: getattr(self, name) for name in self.__slots__}
        out["peer"] = self.host is not None
        return out


@dataclass(slots=True)
class Tally:
    """A request's record while it is served; `perf_counter` times throughout."""

    route: str
    client: str | None
    key: str | None
    began: float = field(default_factory=time.perf_counter)
    wall: float = field(default_factory=time.time)
    model: str = ""
    instance: str | None = None
    host: str | None = None
    queue_s: float = 0.0
    load_s: float = 0.0
    status: int = 0
    ttfb: float | None = None
    ttft: float | None = None
    usage: Usage = NONE

    def waited(self, seconds: float, loading: bool) -> None:
        """The lease took `seconds`: a load's wait when the model was not serving."""
        if loading:
            self.load_s += seconds
        else:
            self.queue_s += seconds

    def record(self, now: float) -> Record:
        """The finished record."""
        u = self.usage
        return Record(
            time=round(self.wall, 3),
            model=self.model,
            instance=self.instance,
            host=self.host,
            route=self.route,
            status=self.status or 499,
            client=self.client,
            key=self.key,
            queue_s=round(self.queue_s, 4),
            load_s=round(self.load_s, 4),
            ttfb_s=None if self.ttfb is None else round(self.ttfb - self.began, 4),
            ttft_s=None if self.ttft is None else round(self.ttft - self.began, 4),
            duration_s=round(now - self.began, 4),
            prompt_tokens=u.prompt_tokens,
            completion_tokens=u.completion_tokens,
            tokens_per_s=None if u.tokens_per_s is None else round(u.tokens_per_s, 2),
            prompt_cached=u.cached_tokens,
            prompt_evaluated=u.evaluated_tokens,
        )


def now() -> float:
    """The clock latency is measured with."""
    return time.perf_counter()


Listener = Callable[[Record], None]


class Activity:
    """The last `size()` records, and whoever wants each one as it ends."""

    def __init__(self, size: Callable[[], int], listeners: Iterable[Listener] = ()) -> None:
        self._size = size
        self._ring: deque[Record] = deque(maxlen=max(1, size()))
        self.listeners = list(listeners)

    def add(self, record: Record) -> None:
        """Keep `record` (the oldest goes when the ring is full) and pass it on."""
        size = max(1, self._size())
        if size != self._ring.maxlen:  # a reload changed activity_size
            self._ring = deque(self._ring, maxlen=size)
        self._ring.append(record)
        for listener in self.listeners:
            listener(record)

    def __len__(self) -> int:
        return len(self._ring)

    def recent(self, model: str | None = None, limit: int | None = None) -> list[Record]:
        """Newest first; only `model`'s (the name asked for, or the instance) if given."""
        out: list[Record] = []
        for r in reversed(self._ring):
            if model is None or model in (r.model, r.instance):
                out.append(r)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def since(self, t: float) -> list[Record]:
        """The records of requests that arrived after wall time `t`, oldest first."""
        out = []
        for r in reversed(self._ring):
            if r.time < t:
                break
            out.append(r)
        return out[::-1]


def begin(scope: Any, began: float, key: str | None) -> Tally:
    """The tally of the request in ASGI `scope`, which arrived at `began` (perf_counter)
    with the key named `key` (None: a gateway without keys)."""
    client = scope.get("client")
    return Tally(
        route=scope["path"],
        client=client[0] if client else None,
        key=key,
        began=began,
    )
