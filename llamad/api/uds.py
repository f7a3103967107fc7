"""Serving an ASGI app on the control socket: safe binding, peer checks, bounded shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

import structlog

from llamad.common.fdlimit import connection_cap
from llamad.common.unixsock import MAX_SOCKET_PATH, SocketInUse, bind_unix
from llamad.listener.exchange import App
from llamad.listener.limits import CONTROL, Refusals
from llamad.listener.peercred import peer_checked
from llamad.listener.server import Listener

__all__ = ["MAX_SOCKET_PATH", "SocketInUse", "bind_unix", "serve_unix"]

log = structlog.get_logger("llamad.control")


async def serve_unix(
    app: App,
    path: Path,
    shutdown: asyncio.Event,
    on_bound: Callable[[], None] | None = None,
    *,
    allowed_uid: int | None = None,
    sock: socket.socket | None = None,
    refused: Refusals | None = None,
) -> None:
    """Serve `app` on the Unix socket `path` until `shutdown` is set, then stop within ~1 s.

    `sock` is the socket already bound at `path` by `bind_unix`, if the caller bound it
    early (the daemon does, to learn it is the only llamad before starting anything).
    `on_bound` runs once the socket accepts connections. Only processes running as
    `allowed_uid` (default: our own uid) are served; others are disconnected unread.
    The socket file is removed on the way out unless someone else has replaced it.
    """
    uid = os.getuid() if allowed_uid is None else allowed_uid
    sock = sock or bind_unix(path)
    inode = os.stat(path).st_ino
    refused = refused or Refusals("control")
    listener = Listener(app, connection_cap(), refused, lambda: CONTROL, accepts=peer_checked(uid))

    def bound() -> None:
        log.info("control.serving", socket=str(path))
        if on_bound is not None:
            on_bound()

    try:
        await listener.serve(sock, shutdown, bound)
    finally:
        _unlink_if_ours(path, inode)
        log.info("control.stopped", socket=str(path))


def _unlink_if_ours(path: Path, inode: int) -> None:
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            path.unlink()
