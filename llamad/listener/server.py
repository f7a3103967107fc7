"""A listener: an ASGI app served on a bound socket until told to stop.

Its connections (`connection.py`) are held to its cap and each address to its share
(`table.py`), and each request is a task of the listener's task group. Shutdown goes as
hypercorn's does: stop accepting, close the connections that wait for a request, let
the requests in flight end within the grace (`GRACEFUL_SHUTDOWN_S` unless given), then
cancel what is left (log followers and streams would hold the listener for ever
otherwise). Before that, while `draining()` says so, everything is served and each
answer closes its connection, so that clients reconnect to whatever a load balancer
sends them to now.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Any

import structlog

from llamad.listener.connection import Connection
from llamad.listener.exchange import App, Exchange
from llamad.listener.limits import Limits, Refused, Shape, control_shape
from llamad.listener.table import ConnTable

log = structlog.get_logger("llamad.listener")

GRACEFUL_SHUTDOWN_S = 1.0


class Listener:
    """Serves `app` with at most `cap` connections, each held to `limits()` (read per
    connection and per request, so that a reload applies); refusals are answered in
    `shape` and told to `refused`; `accepts(socket)` may turn a connection away unread.
    While `draining()`, answers close their connections; `grace()` is read as the
    shutdown begins."""

    def __init__(
        self,
        app: App,
        cap: int,
        refused: Refused,
        limits: Callable[[], Limits] = Limits,
        shape: Shape = control_shape,
        accepts: Callable[[Any], bool] | None = None,
        draining: Callable[[], bool] = lambda: False,
        grace: Callable[[], float] = lambda: GRACEFUL_SHUTDOWN_S,
    ) -> None:
        self.app, self.limits, self.shape, self.refused = app, limits, shape, refused
        self.draining, self._grace = draining, grace
        self.table = ConnTable(cap, refused)
        self.closing = False
        self._accepts = accepts
        self._connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._group: asyncio.TaskGroup | None = None
        self._quiet = asyncio.Event()

    async def serve(
        self,
        sock: socket.socket,
        shutdown: asyncio.Event,
        on_bound: Callable[[], None] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """Serve on the bound, listening `sock` until `shutdown` is set; `on_bound` runs
        once connections are accepted. `sock` is closed on the way out."""
        loop = asyncio.get_running_loop()
        # As many may wait to be accepted as may be held (the kernel caps it at somaxconn):
        # a connection that finds the queue full has its SYN dropped, and its client
        # tries again only after a second, then three. A neighbour churning thousands of
        # connections kept a queue of 1,024 full. (asyncio accepts this many at once.)
        backlog = self.table.cap
        try:
            if sock.family == socket.AF_UNIX:
                server = await loop.create_unix_server(
                    lambda: Connection(self, loop), sock=sock, backlog=backlog
                )
            else:
                server = await loop.create_server(
                    lambda: Connection(self, loop), sock=sock, backlog=backlog, ssl=tls,
                    ssl_handshake_timeout=self.limits().head_timeout if tls else None,
                )  # fmt: skip
        except BaseException:
            sock.close()
            raise
        try:
            async with asyncio.TaskGroup() as self._group:
                if on_bound is not None:
                    on_bound()
                await shutdown.wait()
                server.close()
                await self._wind_down()
        finally:
            server.close()
            for conn in list(self._connections):
                conn.transport.abort()  # those that outlived the graceful window
            sock.close()

    async def _wind_down(self) -> None:
        self.closing = True
        for conn in list(self._connections):
            conn.shutdown()
        self._settle()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._grace()):
                await self._quiet.wait()
        if self._tasks:
            log.warning("listener.requests_cut", requests=len(self._tasks))
            for task in self._tasks:
                task.cancel()

    # What the connections tell (`connection.Site`).
    def accepts(self, transport: Any) -> bool:
        # The socket is asked for only where it is looked at (uvloop makes an object of it).
        return self._accepts is None or self._accepts(transport.get_extra_info("socket"))

    def start(self, exchange: Exchange) -> None:
        assert self._group is not None
        task = self._group.create_task(exchange.run(self.app))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def opened(self, conn: Connection) -> None:
        self._connections.add(conn)

    def lost(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self._settle()

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._settle()

    def _settle(self) -> None:
        if self.closing and not self._tasks and not self._connections:
            self._quiet.set()
