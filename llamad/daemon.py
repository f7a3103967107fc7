"""`llamad`: the foreground daemon. Never forks; launchd or systemd keeps it alive.

The shape follows hypercorn's asyncio runner: a TaskGroup holds the supervisor, the
control server and the reload watcher; a shutdown trigger (SIGTERM/SIGINT, or one a test
injects) stops every instance with deadlines, then the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog

from llamad import __version__, logs, paths
from llamad.config import ConfigError
from llamad.control import create_app
from llamad.controller import DaemonController
from llamad.health import Prober, make_client
from llamad.lock import AlreadyRunning, DaemonLock
from llamad.metrics import Metrics
from llamad.notify import Notifier, watchdog_loop
from llamad.orphans import ChildRegistry
from llamad.reload import Reloader
from llamad.runtime import Runtime
from llamad.spec import Resolved, load
from llamad.supervisor import Supervisor
from llamad.tcp import serve_remote
from llamad.uds import SocketInUse, serve_unix

log = structlog.get_logger("llamad.daemon")

EXIT_OK, EXIT_FATAL, EXIT_CONFIG = 0, 1, 2


async def serve(resolved: Resolved, shutdown: asyncio.Event | None = None) -> int:
    """Run until `shutdown` is set (or SIGTERM/SIGINT); returns the exit code."""
    trigger = shutdown or asyncio.Event()
    services_stop = asyncio.Event()
    bound = asyncio.Event()
    d = resolved.daemon
    registry = ChildRegistry(d.state_dir)
    # Before anything starts: children a SIGKILLed llamad left behind (macOS has no
    # PDEATHSIG) would hold the ports this run needs.
    registry.reap_leftovers()
    async with make_client() as client:
        runtime = Runtime(
            binary=resolved.binary,
            prober=Prober(client),
            log_dir=d.log_dir,
            log_max_bytes=d.log_max_bytes,
            log_backups=d.log_backups,
            registry=registry,
            rpc_binary=resolved.rpc_binary,
        )
        supervisor = Supervisor(runtime)
        reloader = Reloader(resolved, supervisor)
        metrics = Metrics(reloader)
        runtime.observe_probe = metrics.observe_probe
        controller = DaemonController(reloader, lambda: metrics.render(client))
        app = create_app(controller, shutdown=services_stop)
        notifier = Notifier.from_env()
        signals = _SignalHandlers(trigger, supervisor, reloader)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(supervisor.run(), name="supervisor")
                control = group.create_task(
                    serve_unix(app, d.socket, services_stop, on_bound=bound.set), name="control"
                )
                # Nothing starts before the socket is ours: a second llamad must not
                # touch ports and processes before it learns it is the second.
                await _first(bound.wait(), control)
                group.create_task(reloader.run(services_stop), name="reload")
                if d.remote is not None:  # fleet: the same app on TCP with tokens, and mDNS
                    tcp = serve_remote(app, d.remote, services_stop, resolved.llama_server_version)
                    group.create_task(tcp, name="remote")
                group.create_task(watchdog_loop(notifier, services_stop), name="watchdog")
                if notifier.enabled:
                    group.create_task(_report_counts(notifier, supervisor, services_stop))
                await supervisor.apply(resolved.instances)
                notifier.ready()
                log.info(
                    "daemon.started",
                    config=str(resolved.path),
                    socket=str(d.socket),
                    instances=len(resolved.instances),
                    llama_server=str(resolved.binary),
                )
                await trigger.wait()
                log.info("daemon.stopping")
                notifier.stopping()
                await supervisor.shutdown()
                services_stop.set()
        except* SocketInUse as group_exc:
            log.error("daemon.socket_in_use", error=str(group_exc.exceptions[0]))
            code = EXIT_FATAL
        else:
            code = EXIT_OK
        finally:
            signals.remove()
    log.info("daemon.stopped", exit_code=code)
    return code


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


async def _first(aw: Coroutine[Any, Any, Any], task: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(aw)
    try:
        await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


class _SignalHandlers:
    """SIGTERM/SIGINT set the trigger; a second SIGINT kills every child; SIGHUP reloads."""

    def __init__(self, trigger: asyncio.Event, sup: Supervisor, reloader: Reloader) -> None:
        self._loop = asyncio.get_running_loop()
        self._trigger, self._sup = trigger, sup
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        self._loop.add_signal_handler(signal.SIGHUP, reloader.request)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._trigger.is_set() and sig is signal.SIGINT:
            log.warning("daemon.forced", signal=sig.name)
            self._sup.kill_all()
            return
        log.info("daemon.signal", signal=sig.name)
        self._trigger.set()

    def remove(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._loop.remove_signal_handler(sig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of `llamad`."""
    p = argparse.ArgumentParser(
        prog="llamad",
        description="Keep the llama-server instances listed in a TOML file always on. "
        "Runs in the foreground; launchd or systemd keeps it alive.",
    )
    p.add_argument(
        "--config",
        type=Path,
        help="config file (default: $LLAMAD_CONFIG, else ~/.config/llamad/llamad.toml)",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="run the built-in demo: two instances of a generated tiny model on "
        "127.0.0.1:18081 and :18082",
    )
    p.add_argument(
        "--log-format",
        choices=("auto", "console", "json"),
        default="auto",
        help="daemon log format on stderr (default: console on a TTY, JSON otherwise)",
    )
    p.add_argument("--version", action="version", version=f"llamad {__version__}")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `llamad` command."""
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    """Load the config, then serve; exit 2 for a bad config, 1 for a fatal error."""
    args = parse_args(argv)
    if args.demo:
        from llamad.demo import demo_config

        try:
            path = demo_config()
        except RuntimeError as exc:
            print(f"llamad: {exc}", file=sys.stderr)
            return EXIT_FATAL
    else:
        path = args.config or paths.default_config()
    try:
        resolved = load(path)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"llamad: {line}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(resolved.daemon.log_level, args.log_format)
    try:
        with DaemonLock(resolved.daemon.state_dir):
            return asyncio.run(serve(resolved))
    except AlreadyRunning as exc:
        print(f"llamad: {exc}", file=sys.stderr)
        return EXIT_FATAL
