"""Serving an ASGI app on the control socket: safe binding, peer checks, bounded shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from llamad.peercred import peer_checked_protocol

log = logging.getLogger("llamad.control")

# sun_path is 104 bytes on macOS (108 on Linux); the smaller limit keeps configs portable.
MAX_SOCKET_PATH = 104
# Log followers hold their connection open forever; shutdown must not wait on them.
GRACEFUL_SHUTDOWN_S = 1


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
        log.info("control socket: replacing stale %s", path)
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
) -> None:
    """Serve `app` on the Unix socket `path` until `shutdown` is set, then stop within ~1 s.

    `on_bound` runs once the socket accepts connections. Only processes running as
    `allowed_uid` (default: our own uid) are served; others are disconnected unread.
    The socket file is removed on the way out unless someone else has replaced it.
    """
    uid = os.getuid() if allowed_uid is None else allowed_uid
    sock = bind_unix(path)
    inode = os.stat(path).st_ino
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        access_log=False,  # llamactl polls every 50 ms while waiting; that is not news.
        ws="none",
        http=peer_checked_protocol(uid),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    try:
        await serve_until(QuietServer(config, on_bound), sock, shutdown)
    finally:
        _unlink_if_ours(path, inode)


async def serve_until(server: QuietServer, sock: socket.socket, shutdown: asyncio.Event) -> None:
    """Run `server` on the bound `sock` until `shutdown` is set; `sock` is closed after."""

    async def trigger() -> None:
        await shutdown.wait()
        server.should_exit = True

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
