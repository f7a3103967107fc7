"""`llamad`: the foreground daemon. Never forks; launchd or systemd keeps it alive.

The shape follows hypercorn's asyncio runner: a TaskGroup holds the supervisor, the
control server and the reload watcher; a shutdown trigger (SIGTERM/SIGINT, or one a test
injects) turns `/ready` to "stopping" at once, drains the gateway (served on for
`shutdown_delay` while a load balancer lets go, then the requests in flight finish
within `shutdown_grace`), stops every instance with deadlines (each saving its slots),
then the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import uvloop

from llamad.backends.probes import Prober
from llamad.common import fdlimit, paths
from llamad.common.readiness import Readiness
from llamad.common.service_job import EXIT_CONFIG, VALIDATE, under_launchd
from llamad.common.trust import untrusted_dir
from llamad.common.unixsock import SocketInUse, bind_unix
from llamad.common.waits import first_of
from llamad.config.load import Resolved, load
from llamad.config.schema import ConfigError
from llamad.daemon import config_wait, logs
from llamad.daemon.guard import ServiceGuard
from llamad.daemon.lock import AlreadyRunning, DaemonLock
from llamad.daemon.notify import Notifier
from llamad.daemon.signals import SignalHandlers
from llamad.fleet.remote_workers import RemoteWorkers
from llamad.library.listing import log_changes
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.gateway_link import GatewayLink
from llamad.supervise.hooks import ProbeFeed
from llamad.supervise.orphans import ChildRegistry
from llamad.supervise.process import bind_error
from llamad.supervise.runtime import Runtime
from llamad.supervise.slot_cache import SlotCache
from llamad.supervise.slot_checkpoints import Checkpoints
from llamad.supervise.supervisor import Supervisor

if TYPE_CHECKING:  # the gateway's modules load only when one is configured
    from llamad.gateway.core import Gateway

log = structlog.get_logger("llamad.daemon")

EXIT_OK, EXIT_FATAL = 0, 1
STARTUP_GRACE_S = 0.25


async def serve(resolved: Resolved, shutdown: asyncio.Event | None = None) -> int:
    """Run until `shutdown` is set (or SIGTERM/SIGINT); returns the exit code."""
    trigger = shutdown or asyncio.Event()
    asyncio.get_running_loop().set_exception_handler(_loop_error)
    services_stop = asyncio.Event()
    d = resolved.daemon
    try:
        # Before anything starts: a second llamad must learn it is the second before it
        # touches ports and processes.
        control_socket = bind_unix(d.socket)
    except SocketInUse as exc:
        log.error("daemon.socket_in_use", error=str(exc))
        return EXIT_FATAL
    except (ValueError, OSError) as exc:  # a file or symlink in the way, a path too long
        log.error("daemon.socket_unusable", socket=str(d.socket), error=str(exc))
        return EXIT_FATAL
    registry = ChildRegistry(d.state_dir)
    # Children a SIGKILLed llamad left behind (macOS has no PDEATHSIG) hold our ports. The
    # scan for unrecorded ones slows a cold start, so only when a port is taken.
    taken = any(bind_error(s.host, s.port) for s in resolved.instances.values())
    registry.reap_leftovers(scan=taken)
    notifier = Notifier.from_env()
    # Its httpx pool is built at the first probe: httpx loads after the first launch.
    prober = Prober()
    cache = SlotCache(prober.client, d.cache_max)
    gateway: GatewayLink[Gateway] = GatewayLink()  # built later, only with [gateway]
    runtime = Runtime(
        tools=resolved.tools,
        prober=prober,
        log_dir=d.log_dir,
        log_max_bytes=d.log_max_bytes,
        log_backups=d.log_backups,
        registry=registry,
        remote=RemoteWorkers(resolved.peers),
        cache=cache,
        requests=gateway.requests,
    )
    probes = ProbeFeed()
    supervisor = Supervisor(runtime, observe_probe=probes, draining=gateway.draining)
    saves = Checkpoints(cache, supervisor.instances, lambda: state.resolved.daemon)
    state = DaemonState(resolved, supervisor, probes, saves)
    signals = SignalHandlers(trigger, supervisor)
    readiness = Readiness()
    try:
        async with asyncio.TaskGroup() as group:
            guard = ServiceGuard(group, services_stop, trigger)
            group.create_task(supervisor.run(), name="supervisor")
            # Ends as the shutdown begins: the stops' own saves take over.
            guard.start("cache-saves", lambda: saves.run(trigger), retry=True)
            log_changes(None, resolved.library)
            await supervisor.apply(resolved.instances)
            # The web stack loads after the first readiness polls (a small model is
            # ready by then) and in a thread, so probes keep running meanwhile.
            # Until it serves, llamactl's connections wait in the socket's backlog.
            await supervisor.settled(timeout=STARTUP_GRACE_S)
            services = await asyncio.to_thread(importlib.import_module, "llamad.daemon.services")
            started = await services.start(
                guard, state, prober, control_socket, services_stop, notifier, gateway, readiness
            )
            signals.on_hangup(started.reloader.request)
            notifier.ready()
            ready = lambda: _ready(supervisor, readiness, services_stop)  # noqa: E731
            guard.start("readiness", ready, retry=True)
            # What exists by now lives as long as the daemon: full collections, which pause
            # every request in flight, skip it from here on.
            gc.freeze()
            log.info(
                "daemon.started",
                config=str(resolved.path),
                socket=str(d.socket),
                instances=len(resolved.instances),
                backends={k: str(t.command) for k, t in resolved.tools.items()},
            )
            await trigger.wait()
            readiness.stopping()
            log.info("daemon.stopping")
            notifier.stopping(supervisor.summary())
            if started.gateway is not None:
                await started.gateway.drain()
            await supervisor.shutdown()
            services_stop.set()
    finally:
        signals.remove()
        control_socket.close()
        await prober.aclose()
    # A service that ended the daemon: exit non-zero so launchd or systemd starts it again.
    code = EXIT_OK if guard.failed is None else EXIT_FATAL
    log.info("daemon.stopped", exit_code=code)
    return code


async def _ready(supervisor: Supervisor, readiness: Readiness, stop: asyncio.Event) -> None:
    # Ready once what the start launched has settled (running, or failed: the gateway
    # still answers for it), so a rolling update sends no client to models still loading.
    budget = max((i.spec.knobs.start_timeout for i in supervisor.instances.values()), default=0)
    if await first_of(supervisor.settled(timeout=budget), stop.wait()) == 0:
        readiness.started()


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # asyncio's default prints a traceback for each failed accept() (EMFILE under a
    # flood of connections): one rate-limited line says the same.
    exc = context.get("exception")
    log.error("daemon.loop_error", message=context.get("message"), error=str(exc or ""))


def _config_failed(path: Path) -> int:
    """Exit 2 for a bad config; under launchd, only once the file has changed (or 0 on a
    stop): launchd would otherwise restart llamad every 10 s, forever."""
    if not under_launchd(os.environ):
        return EXIT_CONFIG
    return EXIT_CONFIG if config_wait.wait_for_fix(path) else EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Load the config, then serve; exit 2 for a bad config, 1 for a fatal error."""
    if args.demo:
        from llamad.daemon.demo import check_ports, demo_config, what_to_try

        try:
            check_ports()
            path = demo_config()
        except RuntimeError as exc:
            print(f"llamad: {exc}", file=sys.stderr)
            return EXIT_FATAL
        print(what_to_try(path), file=sys.stderr)
    else:
        path = args.config or paths.default_config()
    try:
        resolved = load(path)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"llamad: {line}", file=sys.stderr)
        print(f"llamad: {path}: {VALIDATE} --config {path}", file=sys.stderr)
        return _config_failed(path)
    d = resolved.daemon
    for problem in filter(None, map(untrusted_dir, {d.state_dir, d.socket.parent})):
        print(f"llamad: {problem}", file=sys.stderr)
        return _config_failed(path)
    logs.configure(d.log_level, args.log_format, max_bytes=d.log_max_bytes, backups=d.log_backups)
    for line in resolved.warnings:
        log.warning("config.warning", path=str(path), warning=line)
    nofile = fdlimit.raise_soft_limit()
    log.debug("daemon.nofile", soft_limit=nofile, connections=fdlimit.connection_cap())
    try:
        # uvloop: the gateway's relay costs less CPU per request on it.
        loop = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        with DaemonLock(resolved.daemon.state_dir), loop as runner:
            return runner.run(serve(resolved))
    except AlreadyRunning as exc:
        print(f"llamad: {exc}", file=sys.stderr)
        return EXIT_FATAL
