"""File descriptors: raise the soft limit at start, and budget what the listeners may hold.

launchd starts jobs with a soft RLIMIT_NOFILE of 256 (systemd: 1024). Idle connections
from strangers could take every descriptor, and then the supervisor's own work (health
probes, port checks, log files, spawning) fails with EMFILE. So the daemon raises the
soft limit to the hard one, as servers do, and each listener holds at most a share of
what is left after a reserve for the supervisor.
"""

from __future__ import annotations

import resource
import sys

# Kept for the supervisor: per instance a pipe, a log file, a probe connection, a port
# check; plus the daemon's own files, sockets and the interpreter's.
RESERVE = 64
# Per listener; enough for llamactl polling, log followers and a dashboard or two.
MAX_CONNECTIONS = 128
MIN_CONNECTIONS = 8
# The gateway's cap follows the descriptor limit up to here: an idle connection costs a
# few KB, and past a few thousand clients one llamad is the wrong tool anyway.
MAX_GATEWAY_CONNECTIONS = 4096
# macOS refuses a soft limit above OPEN_MAX even when the hard limit is unlimited.
_DARWIN_OPEN_MAX = 10240


def raise_soft_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if sys.platform == "darwin" and (hard == resource.RLIM_INFINITY or hard > _DARWIN_OPEN_MAX):
        target = _DARWIN_OPEN_MAX
    if target != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the old limit; the connection cap below adapts to it
    return soft


def connection_cap(listeners: int = 2) -> int:
    """How many connections each listener may hold open under the current soft limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    share = (soft - RESERVE) // max(listeners, 1)
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, share))


def gateway_cap(control_listeners: int = 2) -> int:
    """How many client connections the gateway may hold: what the control listeners and
    the reserve leave, halved, since a relayed request holds a connection upstream too."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_GATEWAY_CONNECTIONS
    left = soft - RESERVE - control_listeners * connection_cap()
    return max(MIN_CONNECTIONS, min(MAX_GATEWAY_CONNECTIONS, left // 2))
