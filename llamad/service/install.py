"""`llamactl service`: run llamad under launchd (macOS) or systemd (Linux).

`launchd.py` and `systemd.py` render the job file and drive launchctl/systemctl; they are
imported only when a service command runs, so other llamactl commands do not pay for them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from llamad.service.common import (
    DEFAULT_LABEL,
    MANAGERS,
    Backend,
    InstallOptions,
    Options,
    ServiceError,
    choose_manager,
    find_llamad,
    resolve_config,
    stop_budget,
)


def _backend(manager: str) -> Backend:
    # Lazy imports (see the module docstring); two returns let mypy check each against Backend.
    from llamad.service import launchd, systemd

    if manager == "launchd":
        return launchd
    return systemd


def _install(args: argparse.Namespace, backend: Backend) -> int:
    config = resolve_config(getattr(args, "config", None), os.environ)
    if not args.print_only and not config.is_file():
        raise ServiceError(f"config file {config} not found; create it or pass --config", 2)
    llamad, budget = find_llamad(), stop_budget(config)
    home = Path.home()
    opts = InstallOptions(args.label, args.system, home, config, llamad, budget, os.environ)
    for warning in backend.warnings(opts):
        print(f"llamactl service: warning: {warning}", file=sys.stderr)
    text = backend.render(opts) if args.print_only else "\n".join(backend.install(opts)) + "\n"
    sys.stdout.write(text)
    return 0


def _handler(command: str) -> Callable[[argparse.Namespace], int]:
    """The `func` for one sub-command: every failure becomes one stderr line and a status."""

    def run(args: argparse.Namespace) -> int:
        try:
            backend = _backend(choose_manager(args.manager))
            if command == "install":
                return _install(args, backend)
            opts = Options(args.label, args.system, Path.home())
            if command == "status":
                code, line = backend.status(opts)
                print(line)
                return code
            lines = backend.uninstall(opts) if command == "uninstall" else backend.restart(opts)
            print("\n".join(lines))
            return 0
        except ServiceError as exc:
            print(f"llamactl service: {exc}", file=sys.stderr)
            return exc.exit_code

    return run


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser] = (),
) -> None:
    """Add `service install|uninstall|status|restart` to llamactl's argparse tree.

    `parents` carry llamactl's global options (--config among them) so that they are
    accepted after every service command too, not only before `service`.
    """
    service = subparsers.add_parser(
        "service", parents=list(parents), help="run llamad under launchd or systemd"
    )
    commands = service.add_subparsers(dest="service_command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--label", help=f"launchd job label (default {DEFAULT_LABEL})")
    system_help = "launchd only: a LaunchDaemon, serving before anyone logs in"
    common.add_argument("--system", action="store_true", help=system_help)
    common.add_argument("--manager", choices=MANAGERS, help=argparse.SUPPRESS)
    for name, text in (
        ("install", "write the plist or unit file and start llamad (again)"),
        ("uninstall", "stop llamad and remove the job file"),
        ("status", "show whether llamad is loaded and its pid; exit 3 if not running"),
        ("restart", "restart the running service"),
    ):
        sub = commands.add_parser(name, parents=[*parents, common], help=text, description=text)
        sub.set_defaults(func=_handler(name))
        if name == "install":
            help_print = "write the file to stdout instead of installing"
            sub.add_argument("--print", dest="print_only", action="store_true", help=help_print)
