"""A listener's open connections: a cap for all, a fair share for each client, and the
connections a valid key has vouched for.

A connection counts for a share: its client address (an IPv6 client's /64), with every
loopback address one share, since any local process may send from any of 127/8 or ::1;
once a request on it is let in with a valid key (the app calls `trust(scope, who)`), for
that key instead. One share holds at most `share` of the cap. When a new connection finds
its share full, or the listener at its cap, the stranger's connection that has waited
longest without a whole request head (an idle one or one whose head is still coming, its
own share's first) is closed to make room; only when every other connection is serving a
request or vouched for is the new one turned away. So a client that opens sockets and
sends no head churns its own share and nobody else's, and a vouched connection is never
closed for a stranger. A key past its share vouches for no more: its extra connections
stay strangers' and are surplus, closed for room even while serving (a stream, after
every idle one), so that no key holds more than its share while others need room.
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping
from typing import Any, Protocol

from llamad.common.hosts import client_key, is_loopback
from llamad.listener.limits import Limits, Refused

# Every loopback client's share (`share_key`).
LOOPBACK = "loopback"
# The scope key under which the listener puts a request's `trust` hook.
TRUST = "llamad.trust"


def share_key(host: str | None) -> str | None:
    """The share a client's connections count for: None for a Unix socket's peer."""
    return LOOPBACK if is_loopback(host) else client_key(host)


def trust(scope: MutableMapping[str, Any], who: str) -> None:
    """Tell the listener that `who` (a key's name) vouched for this request's connection."""
    found: Callable[[str], None] | None = scope.get(TRUST)
    if found is not None:
        found(who)


class Conn(Protocol):
    """What the table needs of a connection (`pipeline.Pipeline`)."""

    key: str | None  # the share it counts for; None: a Unix socket
    idle_since: float | None  # since when it has had no whole head; None: serving one
    trusted: bool  # vouched for by a key: never closed for room
    surplus: bool  # its key was past its share: closed for room even while serving

    def evict(self) -> None: ...


class ConnTable:
    """The connections one listener holds, by share."""

    def __init__(self, cap: int, refused: Refused) -> None:
        self.cap = cap
        self.refused = refused
        self.open: dict[Conn, None] = {}  # dicts: ordered, and O(1) removal
        self.by_key: dict[str, dict[Conn, None]] = {}

    def share(self, limits: Limits) -> int:
        """How many connections one share may hold."""
        return max(1, math.floor(self.cap * limits.share))

    def admit(self, conn: Conn, limits: Limits, unshared: bool) -> bool:
        """Take `conn` in, closing a stranger's waiting one if there is no room; False:
        refuse it. `unshared`: held to the cap only (`Limits.trust_loopback`)."""
        mine = self.by_key.get(conn.key, {}) if conn.key is not None else {}
        if conn.key is not None and not unshared and len(mine) >= self.share(limits):
            reason, pool = "share", mine
        elif len(self.open) >= self.cap:
            reason, pool = "capped", self.open
        else:
            self._add(conn)
            return True
        victim = _longest_waiting(pool)
        if victim is None:
            self.refused(reason, conn.key)
            return False
        self.refused(
            f"{reason}_evicted_{'surplus' if victim.idle_since is None else 'idle'}", victim.key
        )
        self.remove(victim)
        victim.evict()
        self._add(conn)
        return True

    def vouch(self, conn: Conn, who: str, limits: Limits) -> None:
        """`conn` counts for key `who` from now on, when that key's share has room (its
        own longest waiting connection goes to make it); else it stays a stranger's."""
        key = f"key:{who}"
        if conn not in self.open or conn.key == key:
            return
        theirs = self.by_key.get(key, {})
        if len(theirs) >= self.share(limits):
            victim = _longest_waiting(theirs, trusted=True)
            if victim is None:
                conn.surplus = True
                return
            self.refused("share_evicted_idle", key)
            self.remove(victim)
            victim.evict()
        self.remove(conn)
        conn.key, conn.trusted, conn.surplus = key, True, False
        self._add(conn)

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


def _longest_waiting(pool: dict[Conn, None], trusted: bool = False) -> Conn | None:
    """The one to close for room: the longest waiting, then a surplus one serving."""
    waiting = [
        c for c in pool
        if (c.idle_since is not None or c.surplus) and (trusted or not c.trusted)
    ]  # fmt: skip
    return min(waiting, key=lambda c: (c.idle_since is None, c.idle_since or 0.0), default=None)
