"""Who is on the other end of a Unix socket, and the check that refuses strangers.

The control socket already lives at 0600 inside a 0700 directory; checking the peer's uid
as well means a mis-set permission (or a socket path under a shared directory) still
cannot hand another user the power to start and stop models.
"""

from __future__ import annotations

import functools
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("llamad.control")

# macOS: <sys/un.h> SOL_LOCAL and LOCAL_PEERCRED; Python does not export them.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
# struct xucred: u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16].
_XUCRED = struct.Struct("=IIh2x16I")


def peer_uid(sock: Any) -> int | None:
    """The uid of the process connected to AF_UNIX `sock`, or None where the OS cannot say.

    `sock` is a socket or the asyncio TransportSocket wrapping one (both have getsockopt).
    """
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is not None:  # Linux and friends: struct ucred {pid, uid, gid}
        raw = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return int(uid)
    if sys.platform == "darwin":
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED.size)
        return int(_XUCRED.unpack(raw)[1])
    return None


def peer_checked(allowed_uid: int) -> Callable[[Any], bool]:
    """A listener's `accepts` (`server.Listener`) that serves only `allowed_uid`.

    Even root is refused unless it is `allowed_uid`: root can read our files anyway, but a
    daemon that takes orders from a second account is one more thing to reason about, and
    `sudo -u` is the honest way for an administrator to talk to someone else's llamad.
    """
    return functools.partial(_allowed, allowed_uid=allowed_uid)


def _allowed(sock: Any, allowed_uid: int) -> bool:
    if sock is None or sock.family != socket.AF_UNIX:
        # TCP has no peer uid; its own guard applies there.
        return True
    try:
        uid = peer_uid(sock)
    except OSError as exc:
        log.warning("control.peer_unknown", error=str(exc))
        return False
    # An OS without a peer-credential call leaves the 0600 socket mode as the only guard.
    if uid is None or uid == allowed_uid:
        return True
    log.warning("control.peer_refused")
    return False
