"""The daemon's services beside the supervisor: control API, reload, remote, sd_notify.

Imported only once the instances have been launched: Starlette, uvicorn, watchfiles and
prometheus_client then load while the models do, instead of delaying every start.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter

import httpx

from llamad.api.app import create_app
from llamad.api.controller import DaemonController
from llamad.api.metrics import Metrics
from llamad.api.tcp import serve_remote
from llamad.api.uds import serve_unix
from llamad.config.load import Resolved
from llamad.daemon.gateway import start_gateway
from llamad.daemon.notify import Notifier, watchdog_loop
from llamad.supervise.reload import Reloader
from llamad.supervise.supervisor import Supervisor


async def start(
    group: asyncio.TaskGroup,
    resolved: Resolved,
    supervisor: Supervisor,
    client: httpx.AsyncClient,
    control_socket: socket.socket,
    stop: asyncio.Event,
    notifier: Notifier,
) -> Reloader:
    """Start every service in `group`; returns once the control socket is served."""
    d = resolved.daemon
    reloader = Reloader(resolved, supervisor)
    metrics = Metrics(reloader)
    supervisor.runtime.observe_probe = metrics.observe_probe
    controller = DaemonController(reloader, lambda: metrics.render(client))
    app = create_app(controller, shutdown=stop)
    bound = asyncio.Event()
    control = group.create_task(
        serve_unix(app, d.socket, stop, on_bound=bound.set, sock=control_socket), name="control"
    )
    waiter = asyncio.ensure_future(bound.wait())
    await asyncio.wait({waiter, control}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    group.create_task(reloader.run(stop), name="reload")
    if d.remote is not None:  # fleet: the same app on TCP with tokens, and mDNS
        tcp = serve_remote(app, d.remote, stop, resolved.llama_server_version)
        group.create_task(tcp, name="remote")
    if resolved.gateway is not None:
        gateway = start_gateway(group, resolved.gateway, reloader, metrics, stop)
        controller.gateway = gateway
    group.create_task(watchdog_loop(notifier, stop), name="watchdog")
    if notifier.enabled:
        group.create_task(_report_counts(notifier, supervisor, stop), name="sd-status")
    return reloader


async def _report_counts(notifier: Notifier, sup: Supervisor, stop: asyncio.Event) -> None:
    """Keep systemd's STATUS= line (`systemctl status llamad`) current: counts per state."""
    last = ""
    while not stop.is_set():
        counts = Counter(i.record.state.value for i in sup.instances.values())
        text = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no instances"
        if text != last:
            notifier.status(text)
            last = text
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=1.0)
