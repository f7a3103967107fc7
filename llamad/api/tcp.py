"""The control API on TCP: the Unix socket's app behind bearer tokens, optionally TLS,
advertised over mDNS once it is bound.

An address not up yet is waited for (`listener.binding`); one that can never be bound
leaves remote control down rather than ending the daemon: the models it keeps running
matter more, and launchd or systemd restarting a daemon that can never bind would only
make things worse.
"""

from __future__ import annotations

import asyncio

import structlog

from llamad import __version__
from llamad.api.auth import BearerAuth
from llamad.common.waits import first_of
from llamad.config.remote import Remote
from llamad.fleet.discovery import advertise, build_txt
from llamad.listener.binding import Binding
from llamad.listener.exchange import App
from llamad.listener.limits import Refusals
from llamad.listener.tcp import serve_tcp

log = structlog.get_logger("llamad.remote")


async def serve_remote(
    app: App,
    remote: Remote,
    shutdown: asyncio.Event,
    llama_version: str,
    binding: Binding,
    refused: Refusals | None = None,
) -> None:
    """`app` on TCP behind BearerAuth, plus the mDNS advertiser, until `shutdown` is set;
    `binding` tells how binding its address goes."""
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
                binding=binding,
            )
        except OSError as exc:  # remote control is gone, not llamad
            if binding.state != "failed":  # a bind failure is logged as the binding's
                log.error("remote.failed", listen=listen, error=str(exc))
