"""Serving the gateway beside the control API, when `[gateway] listen` is set, and its
part of a shutdown: served on while a load balancer lets go, then drained."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from llamad.api.cache import cache_figures
from llamad.api.metrics import Metrics
from llamad.backends.tool import ServerCommand
from llamad.common.fdlimit import gateway_cap
from llamad.common.readiness import Readiness
from llamad.common.retrying import retrying
from llamad.config.gateway_table import GatewayConfig
from llamad.daemon.guard import ServiceGuard
from llamad.gateway.access.limits import GatewayLimits, gateway_shape
from llamad.gateway.access.table import Route
from llamad.gateway.admission.devices.book import DeviceBook
from llamad.gateway.app import build_app
from llamad.gateway.books.metrics import GatewayMetrics
from llamad.gateway.core import Gateway
from llamad.gateway.events_stream import activity_routes
from llamad.gateway.fleet.hosts import FleetHosts
from llamad.gateway.fleet.models import FleetModels, Identity
from llamad.gateway.models.downloads import downloading
from llamad.gateway.models.router import Router
from llamad.gateway.ollama import ollama_routes
from llamad.gateway.page import for_browsers, page_routes
from llamad.gateway.replicas.balancer import Balancer
from llamad.library.pulls import Pulls
from llamad.listener.binding import Binding
from llamad.listener.limits import Refusals
from llamad.listener.tcp import serve_tcp
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.gateway_link import GatewayLink
from llamad.upstream.pool import Pool

log = structlog.get_logger("llamad.gateway")

# A ticker that failed retries sooner than a service: idle stops wait on it.
TASK_RETRY_S = 0.5
# What closing the gateway takes past its grace: the fleet's and the pool's connections.
CLOSE_MARGIN_S = 5.0


def start_gateway(
    guard: ServiceGuard,
    first: GatewayConfig,
    state: DaemonState,
    metrics: Metrics,
    link: GatewayLink[Gateway],
    binding: Binding,
    readiness: Readiness,
    me: Identity | None = None,
    pulls: Pulls | None = None,
) -> Serving:
    """Start the gateway under `guard` and connect `link` to it; its settings follow
    reloads (the address needs a restart), and a config without `[gateway]` leaves the last
    one in force; `binding` tells how binding its address goes. `me` is this daemon's
    identity in status documents: its fleet never routes to itself. `/ready` tells
    `readiness`; the gateway serves until the returned `Serving` has drained."""
    last = [first]

    def settings() -> GatewayConfig:
        now = state.resolved.gateway
        if now is not None and (now.host, now.port) == (first.host, first.port):
            last[0] = now
        return last[0]

    hosts = FleetHosts(
        lambda: state.resolved.fleet,
        lambda: state.resolved.peers,
        lambda: state.resolved.daemon.remote,
    )
    balancer = Balancer(lambda: settings().affinity_size)
    fleet = FleetModels(hosts.current, Router(state.supervisor).owns, me, balancer.id)
    pending = functools.partial(downloading, pulls) if pulls is not None else None
    # The devices llama-server can offload to, listed by the daemon's llama-server (the
    # one the latest reload names: another one is asked again).
    book = DeviceBook(lambda: _server(state))
    gateway = Gateway(
        state.supervisor,
        settings,
        GatewayMetrics(metrics.registry),
        fleet,
        pending,
        balancer,
        book,
        state.saves,
    )
    link.connect(gateway)
    page = _page(gateway, state)
    bounds = GatewayLimits(gateway.settings, lambda: state.resolved.instances)
    refused = Refusals("gateway", metrics.count_refused)
    ends = asyncio.Event()
    serve = functools.partial(
        _serve, gateway, hosts, first, ends, bounds, refused, page, binding, pulls, readiness
    )
    task = guard.start("gateway", serve, retry=True)
    return Serving(task, ends, settings)


class Serving:
    """The gateway's listener as a shutdown sees it."""

    def __init__(
        self, task: asyncio.Task[None], ends: asyncio.Event, settings: Callable[[], GatewayConfig]
    ) -> None:
        self._task, self._ends, self._settings = task, ends, settings

    async def drain(self) -> None:
        """Readiness says stopping already: serve everything for `shutdown_delay` while a
        load balancer lets go, then take no new connection and give the requests in
        flight `shutdown_grace` to finish (the listener cancels what is left)."""
        cfg = self._settings()
        log.info("gateway.stopping", delay_s=cfg.shutdown_delay, grace_s=cfg.shutdown_grace)
        if cfg.shutdown_delay > 0:
            # Not a pause to synchronise on: the delay is the policy. A gateway that
            # ended meanwhile (its address taken) ends the wait.
            await asyncio.wait([self._task], timeout=cfg.shutdown_delay)
        self._ends.set()
        await asyncio.wait([self._task], timeout=cfg.shutdown_grace + CLOSE_MARGIN_S)


def _server(state: DaemonState) -> ServerCommand | None:
    tool = state.resolved.llama_server
    return None if tool is None else tool.command


def _page(gateway: Gateway, state: DaemonState) -> list[Route]:
    async def restart(name: str) -> None:
        inst = state.supervisor.instances.get(name)
        if inst is not None:
            await state.supervisor.restart(inst)

    def log_path(name: str) -> Path | None:
        inst = state.supervisor.instances.get(name)
        return None if inst is None else inst.log.path

    def cache_of(name: str) -> dict[str, Any] | None:
        inst = state.supervisor.instances.get(name)
        return None if inst is None else cache_figures(inst.spec, state.supervisor.runtime.cache)

    return page_routes(gateway, restart, log_path, cache_of)


async def _serve(
    gateway: Gateway,
    hosts: FleetHosts,
    cfg: GatewayConfig,
    stop: asyncio.Event,
    bounds: GatewayLimits,
    refused: Refusals,
    page: list[Route],
    binding: Binding,
    pulls: Pulls | None,
    readiness: Readiness,
) -> None:
    pool = Pool()  # the relay's and Ollama's requests to instances and peers alike
    # The idle ticker, the fleet refresher and the replicas' busy reader: one that raises
    # is logged and runs again (idle stops must not end for good), and none can keep the
    # cleanup below from running.
    background = {
        "gateway-idle": gateway.run,
        "gateway-fleet": lambda: _fleet(gateway, hosts),
        "gateway-watch": gateway.watch.run,
        "gateway-busy": gateway.busy.run,
    }
    listen = f"{cfg.host}:{cfg.port}"
    try:
        async with retrying(background, stop, initial=TASK_RETRY_S, event="gateway.task_failed"):
            aliases = lambda: gateway.settings().list_aliases  # noqa: E731 (follows reloads)
            keepalive = lambda: gateway.settings().keepalive_interval  # noqa: E731
            extra = [
                *activity_routes(gateway, stop),
                *page,
                *ollama_routes(gateway, pool, pulls, aliases, gateway.activity, keepalive),
            ]
            # Every request, of every route, is decided by the door `build_app` makes.
            app = build_app(
                gateway, for_browsers(extra), pool=pool, limits=bounds, refused=refused,
                readiness=readiness,
            )  # fmt: skip
            await serve_tcp(
                app,
                cfg.host,
                cfg.port,
                stop,
                lambda: _bound(listen),
                cap=gateway_cap(),
                limits=bounds,
                shape=gateway_shape,
                refused=refused,
                binding=binding,
                draining=lambda: readiness.draining,
                grace=lambda: gateway.settings().shutdown_grace,
            )
    except OSError as exc:  # the gateway is gone, not llamad (the instances go on)
        if binding.state != "failed":  # a bind failure is logged as the binding's
            log.error("gateway.failed", listen=listen, error=str(exc))
    finally:
        if gateway.fleet is not None:
            await gateway.fleet.close()  # before what a refresh would ask is closed
        await hosts.close()  # the mDNS browser, within its deadline
        await gateway.close()
        await pool.close()


async def _fleet(gateway: Gateway, hosts: FleetHosts) -> None:
    if gateway.fleet is not None:
        await gateway.fleet.run(lambda: gateway.settings().fleet, hosts.close)


def _bound(listen: str) -> None:
    log.info("gateway.listening", listen=listen)
