"""The gateway's live events, fanned out to subscribers (`GET /v1/events`).

`publish` never waits: each subscriber has a bounded backlog, and one that lets it fill
(a client that reads too slowly) is dropped and told so, rather than slowing the
gateway or growing without bound.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any

BACKLOG = 512


class Subscriber:
    """One reader's backlog of encoded events; with `models`, only events about those
    (a key limited to some models) and those about no model."""

    def __init__(self, limit: int, models: frozenset[str] | None = None) -> None:
        self.limit = limit
        self.models = models
        self.pending: deque[bytes] = deque()
        self.dropped = False
        self.closed = False
        self._ready = asyncio.Event()

    def offer(self, data: bytes) -> bool:
        """Queue `data`; False (and dropped) when the backlog is full."""
        if len(self.pending) >= self.limit:
            self.dropped = True
            self._ready.set()
            return False
        self.pending.append(data)
        self._ready.set()
        return True

    def close(self) -> None:
        """End the stream (the gateway is stopping)."""
        self.closed = True
        self._ready.set()

    async def wait(self, timeout: float) -> None:
        """Until something is queued, the subscriber is dropped or closed, or `timeout`."""
        if not (self.pending or self.dropped or self.closed):
            try:
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
            except TimeoutError:
                pass
        self._ready.clear()


class EventBus:
    """Publishes events as SSE-ready bytes to every subscriber."""

    def __init__(self, backlog: int = BACKLOG) -> None:
        self.backlog = backlog
        self._subs: set[Subscriber] = set()
        self.dropped = 0  # subscribers dropped for falling behind, since start

    def subscribe(self, models: frozenset[str] | None = None) -> Subscriber:
        """A new reader (of events about `models` only, if given); `unsubscribe` it when
        done."""
        sub = Subscriber(self.backlog, models)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        """Forget `sub`."""
        self._subs.discard(sub)

    @property
    def subscribers(self) -> int:
        """How many read now."""
        return len(self._subs)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        """Send event `kind` with `data` (plus its time) to every subscriber."""
        if not self._subs:
            return
        now = round(time.time(), 3)
        encoded = _encode(kind, now, data)
        about = data.get("instance") or data.get("model")
        # A stop names the model it made room for: not to a key that may not see it.
        other, hidden = data.get("for_model"), b""
        for sub in list(self._subs):
            if sub.models is not None and about and about not in sub.models:
                continue
            chunk = encoded
            if sub.models is not None and other and other not in sub.models:
                chunk = hidden = hidden or _encode(kind, now, {**data, "for_model": None})
            if not sub.offer(chunk):
                self._subs.discard(sub)
                self.dropped += 1

    def close(self) -> None:
        """End every subscriber's stream."""
        for sub in self._subs:
            sub.close()
        self._subs.clear()


def _encode(kind: str, now: float, data: dict[str, Any]) -> bytes:
    body = json.dumps({"type": kind, "time": now, **data})
    return f"event: {kind}\ndata: {body}\n\n".encode()
