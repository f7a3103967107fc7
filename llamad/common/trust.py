"""Which directories and sockets we may trust: ours (or root's), and not writable by others.

A socket directory another user can write lets them swap the control socket for their
own and answer llamactl; a state directory they can write lets them plant children.json
and have llamad kill any process group at start. Standard library only: llamactl checks
the socket's owner before it sends a byte.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def trusted_owner(uid: int) -> bool:
    """Our own uid, or root's (root can do anything to our files anyway)."""
    return uid in (os.getuid(), 0)


def untrusted_dir(path: Path) -> str | None:
    """Why `path` (an existing directory) is not safe to keep our socket or state in; None
    when it is ours and no one else can write it (or when it does not exist yet)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None  # created later, 0700
    except OSError as exc:
        return f"{path}: cannot check it: {exc.strerror}"
    mode = stat.S_IMODE(st.st_mode)
    if not trusted_owner(st.st_uid):
        return (
            f"{path} belongs to uid {st.st_uid}, not to us (uid {os.getuid()}); "
            "use a directory of your own"
        )
    if mode & _OTHERS_WRITE:
        return f"{path} can be written by other users (mode {mode:04o}); run: chmod 700 {path}"
    return None


def owned_by_us(path: Path) -> bool:
    """Whether the file at `path` belongs to our uid (a file we wrote, not a plant)."""
    try:
        return os.stat(path).st_uid == os.getuid()
    except OSError:
        return False


class UntrustedSocket(PermissionError):
    """The control socket belongs to another user: talking to it could hand them our
    commands (and trust their answers)."""

    def __init__(self, path: Path, uid: int) -> None:
        super().__init__(
            errno.EPERM,
            f"refusing to talk to {path}: it belongs to uid {uid}, not to you or root",
        )


def check_socket_owner(path: Path) -> None:
    """Raise UntrustedSocket unless the socket at `path` is ours or root's (a missing
    socket is left for connect() to report)."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return
    if not trusted_owner(uid):
        raise UntrustedSocket(path, uid)
