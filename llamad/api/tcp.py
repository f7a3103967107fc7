"""The control API on TCP: the Unix socket's app behind bearer tokens, optionally TLS,
advertised over mDNS once it is bound.

A port that cannot be bound is retried with backoff rather than ending the daemon: the
models it keeps running matter more than remote control, and launchd or systemd
restarting a daemon that can never bind would only make things worse.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import uvicorn

from llamad import __version__
from llamad.api.auth import BearerAuth
from llamad.api.connguard import HttpProtocol, guarded_protocol
from llamad.api.lane import Lane, laned
from llamad.api.uds import GRACEFUL_SHUTDOWN_S, QuietServer, serve_until
from llamad.common.fdlimit import connection_cap
from llamad.common.limits import CONTROL, Limits, Refusals, Shape, control_shape
from llamad.common.waits import first_of
from llamad.config.remote import Remote
from llamad.fleet.discovery import advertise, build_txt

log = structlog.get_logger("llamad.remote")

RETRY_INITIAL_S, RETRY_MAX_S = 1.0, 30.0


def bind_tcp(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on host:port (SO_REUSEADDR: a restart finds it free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not create_server's 0: accepted sockets inherit it, and asyncio
    # sets TCP_NODELAY only on sockets that say TCP. Without it every answer written in
    # two parts (headers, body) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_tcp(
    app: Any,
    host: str,
    port: int,
    shutdown: asyncio.Event,
    on_bound: Callable[[], None] | None = None,
    *,
    ssl_certfile: Path | None = None,
    ssl_keyfile: Path | None = None,
    cap: int | None = None,
    limits: Callable[[], Limits] = lambda: CONTROL,
    shape: Shape = control_shape,
    refused: Refusals | None = None,
    lane: Lane | None = None,
) -> None:
    """Serve `app` on host:port (HTTPS when given a cert and key) until `shutdown` is set,
    at most `cap` connections (default: a control listener's), each held to `limits()`;
    `lane` serves the requests it takes past `app` (`lane.py`).

    Raises OSError before serving when the address cannot be bound.
    """
    cap = cap or connection_cap()
    # Also how many asyncio accepts at once: a bounded burst of descriptors.
    backlog = min(cap, 1024)
    sock = bind_tcp(host, port, backlog=backlog)
    protocol = guarded_protocol(HttpProtocol, cap, limits, shape, refused or Refusals("remote"))
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        access_log=False,
        ws="none",
        http=protocol if lane is None else laned(protocol, lane),
        backlog=backlog,
        # The rate limit keys on the peer address; a forwarded header would let a
        # client choose its own.
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    await serve_until(QuietServer(config, on_bound), sock, shutdown)


async def serve_remote(
    app: Any,
    remote: Remote,
    shutdown: asyncio.Event,
    llama_version: str,
    refused: Refusals | None = None,
) -> None:
    """`app` on TCP behind BearerAuth, plus the mDNS advertiser, until `shutdown` is set."""
    guarded = BearerAuth(app, remote.admin_token, remote.read_token)
    bound = asyncio.Event()
    listen = f"{remote.host}:{remote.port}"

    def on_bound() -> None:
        bound.set()
        log.info("remote.listening", listen=listen, tls=remote.tls)

    async def advertise_when_bound() -> None:
        await first_of(bound.wait(), shutdown.wait())
        if bound.is_set() and not shutdown.is_set():
            txt = build_txt(__version__, llama_version, remote.tls)
            await advertise(remote.host, remote.port, txt, shutdown)

    async with asyncio.TaskGroup() as group:
        if remote.advertise:
            group.create_task(advertise_when_bound(), name="advertise")
        delay = RETRY_INITIAL_S
        while not shutdown.is_set():
            try:
                await serve_tcp(
                    guarded,
                    remote.host,
                    remote.port,
                    shutdown,
                    on_bound,
                    ssl_certfile=remote.tls_cert,
                    ssl_keyfile=remote.tls_key,
                    refused=refused,
                )
                return
            except OSError as exc:
                if bound.is_set():  # served, then failed: remote control is gone, not llamad
                    log.error("remote.failed", listen=listen, error=str(exc))
                    return
                log.error("remote.bind_failed", listen=listen, error=str(exc), retry_s=delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await shutdown.wait()
            delay = min(delay * 2, RETRY_MAX_S)
