"""Binding the control socket safely, with the standard library alone.

The daemon binds it before importing the web stack, so a second llamad learns it is the
second before it starts (or imports) anything.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import structlog

log = structlog.get_logger("llamad.control")

# sun_path is 104 bytes on macOS (108 on Linux); the smaller limit keeps configs portable.
MAX_SOCKET_PATH = 104


class SocketInUse(Exception):
    """Another process answers on the control socket: a second llamad must not take it over."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"another llamad is already serving {path}")
        self.path = path


def bind_unix(path: Path) -> socket.socket:
    """A listening AF_UNIX socket at `path`, mode 0600, in a directory made 0700 if created.

    Replaces a stale socket file (nobody answers); raises SocketInUse if somebody does,
    and ValueError for a path too long for AF_UNIX or occupied by something not a socket.
    """
    path = Path(path)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ValueError(
            f"control socket path is {len(os.fsencode(path))} bytes, longer than the "
            f"{MAX_SOCKET_PATH}-byte AF_UNIX limit: {path}"
        )
    with _umask(0o077):
        # Only directories we create get 0700: an existing parent (even /tmp) is not ours.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Under umask 077 the socket is born 0600, so there is no window where it is open.
            sock.bind(os.fspath(path))
            os.chmod(path, 0o600)
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
    return sock


def _clear_stale(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ValueError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except ConnectionRefusedError:
        log.info("control.socket_replaced", path=str(path), reason="nothing answered on it")
        path.unlink(missing_ok=True)
        return
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return
        raise
    finally:
        probe.close()
    raise SocketInUse(path)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    # The umask is process-wide; it is held only across a mkdir and a bind.
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
