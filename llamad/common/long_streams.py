"""How many long-lived streams one limited key may hold at once: the gateway's event
stream (`/v1/events`) and the control API's log follows (`llamactl logs -f`).

Such a stream holds a connection for as long as its client likes, so a key limited to
some models (a gateway key with a `models` list, the control API's read token) could
otherwise take the listener's connections from every other caller with streams alone.
A key with every right is the operator's own, and is not held to it.
"""

from __future__ import annotations

from collections import Counter

# Enough for a page, a dashboard and a few `llamactl logs -f` windows at once.
LONG_STREAMS_PER_KEY = 8


def refused(limit: int) -> str:
    """The message of a refused stream (a 429)."""
    return f"this key holds {limit} long-lived streams already; close one first"


class LongStreams:
    """The long-lived streams each key holds; a stream is taken and counted in one
    synchronous step, and given back when it ends."""

    def __init__(self, limit: int = LONG_STREAMS_PER_KEY) -> None:
        self.limit = limit
        self.held: Counter[str] = Counter()

    def take(self, key: str) -> bool:
        """One more stream for `key`, or False when it holds `limit` already."""
        if self.held[key] >= self.limit:
            return False
        self.held[key] += 1
        return True

    def give(self, key: str) -> None:
        """A stream `take` counted has ended."""
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]
