"""The daemon's services beside the supervisor: control API, reload, remote, sd_notify.

Imported only once the instances have been launched: Starlette, the listener, watchfiles and
prometheus_client then load while the models do, instead of delaying every start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from typing import TYPE_CHECKING, NamedTuple

from llamad.api.app import create_app
from llamad.api.cache import cache_routes
from llamad.api.controller import DaemonController
from llamad.api.library import library_routes
from llamad.api.metrics import Metrics
from llamad.api.tcp import serve_remote
from llamad.api.uds import serve_unix
from llamad.backends.probes import Prober
from llamad.common.readiness import Readiness
from llamad.common.waits import first_of
from llamad.daemon.guard import ServiceGuard
from llamad.daemon.keep_awake import KeepAwake
from llamad.daemon.library_unload import unload_for_removal
from llamad.daemon.notify import Notifier, watchdog_loop
from llamad.fleet.peers import identity
from llamad.library.pulls import Pulls
from llamad.listener.binding import Bindings
from llamad.listener.limits import Refusals
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.gateway_link import GatewayLink
from llamad.supervise.reload import Reloader
from llamad.supervise.supervisor import Supervisor

if TYPE_CHECKING:  # the gateway's modules load only when one is configured
    from llamad.daemon.gateway import Serving
    from llamad.gateway.core import Gateway


async def start(
    guard: ServiceGuard,
    state: DaemonState,
    prober: Prober,
    control_socket: socket.socket,
    stop: asyncio.Event,
    notifier: Notifier,
    link: GatewayLink[Gateway],
    readiness: Readiness,
) -> Started:
    """Start every service under `guard`; returns once the control socket is served.
    `link` is connected to the gateway when the config has one, whose `/ready` tells
    `readiness`."""
    resolved, supervisor = state.resolved, state.supervisor
    d = resolved.daemon
    reloader = Reloader(state)
    metrics = Metrics(state)
    state.probes.listen(metrics.observe_probe)
    # Instances' own metrics are re-exported through the probes' client.
    render = functools.partial(metrics.render, prober.client)
    listeners = Bindings()  # the TCP listeners' binds, for the status document
    awake = KeepAwake(link.requests, lambda: state.resolved.daemon.keep_awake)
    views = {"listeners": listeners.to_dict, "keep_awake": awake.status}
    controller = DaemonController(state, reloader.reload, render, link, views)
    # `rm` unloads a model through the gateway before its files go.
    unload = functools.partial(unload_for_removal, link, state)
    pulls = Pulls(lambda: state.resolved.library, reloader.reload, unload)
    app = create_app(
        controller,
        shutdown=stop,
        extra_routes=[*library_routes(state, pulls), *cache_routes(state)],
    )
    bound = asyncio.Event()
    # Without its control socket the daemon cannot be managed: that failure ends it.
    control = guard.start(
        "control",
        lambda: serve_unix(
            app,
            d.socket,
            stop,
            on_bound=bound.set,
            sock=control_socket,
            refused=Refusals("control", metrics.count_refused),
        ),
        retry=False,
    )
    await first_of(bound.wait(), asyncio.wait([control]))  # the guard owns `control`
    guard.start("reload", lambda: reloader.run(stop), retry=True)
    guard.start("pulls", lambda: pulls.run(stop), retry=True)
    if (remote := d.remote) is not None:  # fleet: the same app on TCP with tokens, and mDNS
        version = resolved.llama_server_version
        refused = Refusals("remote", metrics.count_refused)
        binding = listeners.add("remote", f"{remote.host}:{remote.port}")
        guard.start(
            "remote", lambda: serve_remote(app, remote, stop, version, binding, refused), retry=True
        )
    gateway = None
    if resolved.gateway is not None:
        # Only a daemon with a gateway pays for its modules (memory, and start time).
        from llamad.daemon.gateway import start_gateway

        me = identity(controller.status())
        cfg = resolved.gateway
        binding = listeners.add("gateway", f"{cfg.host}:{cfg.port}")
        gateway = start_gateway(guard, cfg, state, metrics, link, binding, readiness, me, pulls)
        guard.start("keep-awake", lambda: awake.run(stop), retry=True)
    guard.start("watchdog", lambda: watchdog_loop(notifier, stop), retry=True)
    if notifier.enabled:
        guard.start("sd-status", lambda: _report_counts(notifier, supervisor, stop), retry=True)
    return Started(reloader, gateway)


class Started(NamedTuple):
    """What the daemon's shutdown needs of the services: the reloader for SIGHUP, and
    the gateway's serving (None without one) to drain before the instances stop."""

    reloader: Reloader
    gateway: Serving | None


async def _report_counts(notifier: Notifier, sup: Supervisor, stop: asyncio.Event) -> None:
    """Keep systemd's STATUS= line (`systemctl status llamad`) current: counts per state."""
    last = ""
    while not stop.is_set():
        text = sup.summary()
        if text != last:
            notifier.status(text)
            last = text
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=1.0)
