"""The control API on TCP: the Unix socket's app behind bearer tokens, optionally TLS,
advertised over mDNS once it is bound.

A port that cannot be bound is retried with backoff rather than ending the daemon: the
models it keeps running matter more than remote control, and launchd or systemd
restarting a daemon that can never bind would only make things worse.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from llamad import __version__
from llamad.api.auth import BearerAuth
from llamad.common.waits import first_of
from llamad.config.remote import Remote
from llamad.fleet.discovery import advertise, build_txt
from llamad.listener.exchange import App
from llamad.listener.limits import Refusals
from llamad.listener.tcp import serve_tcp

log = structlog.get_logger("llamad.remote")

RETRY_INITIAL_S, RETRY_MAX_S = 1.0, 30.0


async def serve_remote(
    app: App,
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
                    refused=refused or Refusals("remote"),
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
