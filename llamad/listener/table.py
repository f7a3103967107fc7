"""A listener's open connections: a cap for all, a fair share for each client address.

One address may hold at most `share` of the cap. When a new connection finds its address
at its share, or the listener at its cap, the connection that has waited longest without
a request (its own address's first) is closed to make room; only when every connection
is busy serving a request is the new one turned away. A client that merely reopens idle
sockets then churns its own share and nobody else's.
"""

from __future__ import annotations

import math
from typing import Protocol

from llamad.listener.limits import Limits, Refused


class Conn(Protocol):
    """What the table needs of a connection (`connection.Connection`)."""

    key: str | None  # the client address a share counts for; None: a Unix socket
    idle_since: float | None  # when it last waited for a request; None: serving one

    def evict(self) -> None: ...


class ConnTable:
    """The connections one listener holds, by client address."""

    def __init__(self, cap: int, refused: Refused) -> None:
        self.cap = cap
        self.refused = refused
        self.open: dict[Conn, None] = {}  # dicts: ordered, and O(1) removal
        self.by_key: dict[str, dict[Conn, None]] = {}

    def share(self, limits: Limits) -> int:
        """How many connections one address may hold."""
        return max(1, math.floor(self.cap * limits.share))

    def admit(self, conn: Conn, limits: Limits, trusted: bool) -> bool:
        """Take `conn` in, closing an idle one if there is no room; False: refuse it."""
        mine = self.by_key.get(conn.key, {}) if conn.key is not None else {}
        if conn.key is not None and not trusted and len(mine) >= self.share(limits):
            reason, pool = "share", mine
        elif len(self.open) >= self.cap:
            reason, pool = "capped", self.open
        else:
            self._add(conn)
            return True
        victim = _longest_idle(pool)
        if victim is None:
            self.refused(reason, conn.key)
            return False
        self.refused(f"{reason}_evicted_idle", victim.key)
        self.remove(victim)
        victim.evict()
        self._add(conn)
        return True

    def remove(self, conn: Conn) -> None:
        """Forget `conn` (closed); a no-op when it was never admitted."""
        if conn not in self.open:
            return
        del self.open[conn]
        mine = self.by_key.get(conn.key) if conn.key is not None else None
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_key[conn.key]  # type: ignore[arg-type]

    def _add(self, conn: Conn) -> None:
        self.open[conn] = None
        if conn.key is not None:
            self.by_key.setdefault(conn.key, {})[conn] = None


def _longest_idle(pool: dict[Conn, None]) -> Conn | None:
    idle = [c for c in pool if c.idle_since is not None]
    return min(idle, key=lambda c: c.idle_since or 0.0, default=None)
