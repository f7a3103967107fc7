"""Serving an ASGI app on the control socket: safe binding, peer checks, bounded shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog
import uvicorn

from llamad.api.connguard import guarded_protocol
from llamad.api.peercred import peer_checked_protocol
from llamad.common.fdlimit import connection_cap
from llamad.common.limits import CONTROL, Refusals
from llamad.common.unixsock import MAX_SOCKET_PATH, SocketInUse, bind_unix

__all__ = [
    "MAX_SOCKET_PATH",
    "QuietServer",
    "SocketInUse",
    "bind_unix",
    "serve_unix",
    "serve_until",
]

log = structlog.get_logger("llamad.control")

# Log followers hold their connection open forever; shutdown must not wait on them.
GRACEFUL_SHUTDOWN_S = 1


class QuietServer(uvicorn.Server):
    """uvicorn's server minus its signal handling, which belongs to the daemon."""

    def __init__(self, config: uvicorn.Config, on_bound: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_bound = on_bound

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Upstream swaps SIGINT/SIGTERM handlers and re-raises them on exit; the daemon's
        # shutdown Event is the one trigger, so do nothing here.
        yield

    async def main_loop(self) -> None:
        # uvicorn ticks ten times a second, which is most of an idle daemon's CPU. Once a
        # second keeps the Date header current; stop() wakes the loop for a prompt exit.
        self._wake = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)

    def stop(self) -> None:
        """Ask the server to shut down now."""
        self.should_exit = True
        wake = getattr(self, "_wake", None)
        if wake is not None:
            wake.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._on_bound is not None:
            self._on_bound()


async def serve_unix(
    app: Any,
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
    cap = connection_cap()
    sock = sock or bind_unix(path)
    inode = os.stat(path).st_ino
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        access_log=False,  # llamactl polls every 50 ms while waiting; that is not news.
        ws="none",
        http=guarded_protocol(
            peer_checked_protocol(uid), cap, lambda: CONTROL, refused=refused or Refusals("control")
        ),
        backlog=cap,  # also how many asyncio accepts at once: a bounded burst of fds
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )

    def bound() -> None:
        # uvicorn's own startup lines are prose; this is the one event that says it.
        log.info("control.serving", socket=str(path))
        if on_bound is not None:
            on_bound()

    try:
        await serve_until(QuietServer(config, bound), sock, shutdown)
    finally:
        _unlink_if_ours(path, inode)
        log.info("control.stopped", socket=str(path))


async def serve_until(server: QuietServer, sock: socket.socket, shutdown: asyncio.Event) -> None:
    """Run `server` on the bound `sock` until `shutdown` is set; `sock` is closed after."""

    async def trigger() -> None:
        await shutdown.wait()
        server.stop()

    watcher = asyncio.create_task(trigger())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        sock.close()
        # Connections that outlived the graceful window are cut so nothing leaks.
        for conn in list(server.server_state.connections):
            transport = getattr(conn, "transport", None)
            if transport is not None:
                transport.abort()


def _unlink_if_ours(path: Path, inode: int) -> None:
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            path.unlink()
