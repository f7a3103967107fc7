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

Who goes for room is found in constant time: a connection that opens only to be closed
for room again (a neighbour churning thousands) must cost as little as its accept, not
a walk over its share. So each share, and the table for strangers, keeps its candidates
in the order they would go, told by the connection whenever it starts or stops waiting
(`moved`).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from typing import Any, Protocol

from llamad.common.hosts import client_key, is_loopback
from llamad.listener.limits import Limits, Refused

# Every loopback client's share (`share_key`).
LOOPBACK = "loopback"
# The scope key under which the listener puts a request's `trust` hook.
TRUST = "llamad.trust"


@functools.lru_cache(maxsize=4096)
def share_key(host: str | None) -> str | None:
    """The share a client's connections count for: None for a Unix socket's peer.
    Kept for the addresses seen last: a neighbour's churn asks for the same few."""
    return LOOPBACK if is_loopback(host) else client_key(host)


def trust(scope: MutableMapping[str, Any], who: str) -> None:
    """Tell the listener that `who` (a key's name) vouched for this request's connection."""
    found: Callable[[str], None] | None = scope.get(TRUST)
    if found is not None:
        found(who)


class Conn(Protocol):
    """What the table needs of a connection (`pipeline.Pipeline`); it calls `moved` on
    its table whenever `idle_since` changes."""

    key: str | None  # the share it counts for; None: a Unix socket
    idle_since: float | None  # since when it has had no whole head; None: serving one
    trusted: bool  # vouched for by a key: never closed for room
    surplus: bool  # its key was past its share: closed for room even while serving

    def evict(self) -> None: ...


class Room:
    """Connections, and those of them that may be closed for room in the order they
    would go: the ones waiting for a head, longest first, then surplus ones serving."""

    __slots__ = ("conns", "surplus", "waiting")

    def __init__(self) -> None:
        self.conns: dict[Conn, None] = {}  # dicts: ordered, and O(1) removal
        self.waiting: OrderedDict[Conn, None] = OrderedDict()
        self.surplus: dict[Conn, None] = {}

    def __len__(self) -> int:
        return len(self.conns)

    def add(self, conn: Conn, candidate: bool = True) -> None:
        self.conns[conn] = None
        self.place(conn, candidate)

    def remove(self, conn: Conn) -> None:
        del self.conns[conn]
        self.waiting.pop(conn, None)
        self.surplus.pop(conn, None)

    def place(self, conn: Conn, candidate: bool = True) -> None:
        """Where `conn` stands now (`candidate`: it may go for room at all)."""
        waiting = self.waiting
        waiting.pop(conn, None)
        self.surplus.pop(conn, None)
        if not candidate:
            return
        since = conn.idle_since
        if since is None:
            if conn.surplus:
                self.surplus[conn] = None
            return
        last = next(reversed(waiting), None)
        waiting[conn] = None
        if last is None or since >= (last.idle_since or 0.0):
            return  # marks come in loop time: the usual case
        if since <= (next(iter(waiting)).idle_since or 0.0):
            waiting.move_to_end(conn, last=False)  # one set first (0.0, a refusal's)
            return
        for c in sorted(waiting, key=lambda c: c.idle_since or 0.0):
            waiting.move_to_end(c)

    def first(self) -> Conn | None:
        """The one to close for room: the longest waiting, then a surplus one serving."""
        for pool in (self.waiting, self.surplus):
            for conn in pool:
                return conn
        return None


class ConnTable:
    """The connections one listener holds, by share."""

    def __init__(self, cap: int, refused: Refused) -> None:
        self.cap = cap
        self.refused = refused
        self.open = Room()  # every connection; strangers' alone are candidates
        self.by_key: dict[str, Room] = {}

    def share(self, limits: Limits) -> int:
        """How many connections one share may hold."""
        return max(1, math.floor(self.cap * limits.share))

    def admit(self, conn: Conn, limits: Limits, unshared: bool) -> bool:
        """Take `conn` in if there is `room` for it; False: refuse it."""
        if not self.room(conn.key, limits, unshared):
            return False
        self.add(conn)
        return True

    def room(self, key: str | None, limits: Limits, unshared: bool) -> bool:
        """Whether a new connection of share `key` may come in, closing a stranger's
        waiting one to make room if need be; False: it is refused. `unshared`: held to
        the cap only (`Limits.trust_loopback`). The caller `add`s it at once."""
        mine = self.by_key.get(key) if key is not None else None
        if mine is not None and not unshared and len(mine) >= self.share(limits):
            reason, pool = "share", mine
        elif len(self.open) >= self.cap:
            reason, pool = "capped", self.open
        else:
            return True
        victim = pool.first()
        if victim is None:
            self.refused(reason, key)
            return False
        self.refused(
            f"{reason}_evicted_{'surplus' if victim.idle_since is None else 'idle'}", victim.key
        )
        self.remove(victim)
        victim.evict()
        return True

    def moved(self, conn: Conn) -> None:
        """`conn` started or stopped waiting for a head: where it stands for room."""
        if conn not in self.open.conns:
            return
        self.open.place(conn, not conn.trusted)
        mine = self.by_key.get(conn.key) if conn.key is not None else None
        if mine is not None:
            mine.place(conn)

    def vouch(self, conn: Conn, who: str, limits: Limits) -> None:
        """`conn` counts for key `who` from now on, when that key's share has room (its
        own longest waiting connection goes to make it); else it stays a stranger's."""
        key = f"key:{who}"
        if conn not in self.open.conns or conn.key == key:
            return
        theirs = self.by_key.get(key)
        if theirs is not None and len(theirs) >= self.share(limits):
            victim = theirs.first()  # theirs are all vouched for: none is surplus
            if victim is None:
                conn.surplus = True
                self.moved(conn)
                return
            self.refused("share_evicted_idle", key)
            self.remove(victim)
            victim.evict()
        self.remove(conn)
        conn.key, conn.trusted, conn.surplus = key, True, False
        self.add(conn)

    def remove(self, conn: Conn) -> None:
        """Forget `conn` (closed); a no-op when it was never admitted."""
        if conn not in self.open.conns:
            return
        self.open.remove(conn)
        key = conn.key
        mine = self.by_key.get(key) if key is not None else None
        if key is not None and mine is not None:
            mine.remove(conn)
            if not mine.conns:
                del self.by_key[key]

    def add(self, conn: Conn) -> None:
        """Count `conn` in (`room` was made for it)."""
        self.open.add(conn, not conn.trusted)
        if conn.key is not None:
            self.by_key.setdefault(conn.key, Room()).add(conn)
