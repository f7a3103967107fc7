"""`llamad`'s command line. `--help` and `--version` answer from here, before the daemon
(structlog, pydantic, the supervisor) is imported: a service manager or a user checking
the install pays for argparse alone."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from llamad import __version__
from llamad.daemon import logformat


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
        "127.0.0.1:18081 and :18082, a third on demand, and the gateway on 127.0.0.1:18080",
    )
    p.add_argument(
        "--log-format",
        choices=("auto", "console", "json"),
        default="auto",
        help="daemon log format on stderr (default: console on a TTY, JSON otherwise)",
    )
    p.add_argument("--version", action="version", version=f"llamad {__version__}")
    return p.parse_args(argv)


def load_daemon(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The daemon's `run`, imported only now that it is to run; with JSON logs, without
    the modules only console output uses."""
    if logformat.resolve(args.log_format, sys.stderr) == "json":
        logformat.keep_out_console_only()
    from llamad.daemon.main import run

    return run


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `llamad` command."""
    args = parse_args(argv)
    sys.exit(load_daemon(args)(args))
