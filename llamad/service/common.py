"""What the launchd and systemd back ends share: options, errors, the config path and the
stop budget. Standard library only."""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from llamad.common import paths

MANAGERS = ("launchd", "systemd")
DEFAULT_LABEL = "dev.llamad.daemon"
# Used when the config sets no stop_timeout; matches the daemon's own default.
DEFAULT_STOP_TIMEOUT = 10.0
# Time for the daemon itself to wind down after its slowest instance has stopped.
STOP_MARGIN = 5.0
# `[gateway] shutdown_grace`'s default: the gateway's requests in flight finish first.
DEFAULT_SHUTDOWN_GRACE = 10.0


class ServiceError(Exception):
    """A failure shown as one line; `exit_code` (1, or 2 for misuse) is llamactl's status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Options:
    """What every service command needs. `label` is None unless --label was given."""

    label: str | None
    system: bool
    home: Path


@dataclass(frozen=True)
class InstallOptions(Options):
    """What `install` adds: absolute paths, the stop budget that sizes kill timeouts, and
    the environment install ran in (launchd carries a few of its variables, never all)."""

    config: Path
    llamad: Path
    stop_budget: float
    environ: Mapping[str, str] = field(default_factory=dict)


class Backend(Protocol):
    """The interface `llamad.launchd` and `llamad.systemd` both provide, as modules."""

    def render(self, opts: InstallOptions) -> str: ...
    def warnings(self, opts: InstallOptions) -> list[str]: ...
    def install(self, opts: InstallOptions) -> list[str]: ...
    def uninstall(self, opts: Options) -> list[str]: ...
    def restart(self, opts: Options) -> list[str]: ...
    def status(self, opts: Options) -> tuple[int, str]: ...


def run_tool(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run launchctl/systemctl (found on PATH) capturing output; a failure raises if `check`."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ServiceError(f"{argv[0]} not found on PATH") from None
    if check and result.returncode != 0:
        raise failure(result)
    return result


def failure(result: subprocess.CompletedProcess[str]) -> ServiceError:
    """One line naming the command, its exit code and what it said."""
    said = "; ".join(line.strip() for line in (result.stderr or result.stdout).splitlines())
    command = " ".join(str(arg) for arg in result.args)
    return ServiceError(f"{command} failed (exit {result.returncode}): {said or 'no output'}")


def stop_timeout_seconds(stop_budget: float) -> int:
    """launchd ExitTimeOut / systemd TimeoutStopSec: never shorter than the daemon's budget."""
    return math.ceil(stop_budget) + 5


def resolve_config(arg: str | None, environ: Mapping[str, str]) -> Path:
    """The config path made absolute: launchd and systemd start us in another directory."""
    path = Path(arg) if arg else paths.default_config(environ)
    return Path(os.path.abspath(path.expanduser()))


def stop_budget(config: Path) -> float:
    """Seconds the daemon may need to stop: the gateway's drain (`shutdown_delay` and
    `shutdown_grace`), then the slowest stop_timeout, plus a margin.

    A plain TOML read, so that this stays standard-library only and never fails on a
    config the daemon would reject: it only sizes a kill timeout.
    """
    try:
        with config.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return DEFAULT_STOP_TIMEOUT + STOP_MARGIN
    # Instances stop in parallel, so the slowest one sets the budget, not the sum.
    instances = data.get("instances")
    tables = instances.values() if isinstance(instances, dict) else ()
    own = [t for t in map(_stop_timeout, tables) if t is not None]
    default = _stop_timeout(data)
    slowest = max([DEFAULT_STOP_TIMEOUT if default is None else default, *own])
    return _drain(data.get("gateway")) + slowest + STOP_MARGIN


def _drain(gateway: object) -> float:
    """The gateway's shutdown_delay and shutdown_grace (the daemon's defaults for those
    not given); none without a gateway that listens."""
    if not isinstance(gateway, dict) or "listen" not in gateway:
        return 0.0
    delay, grace = (_seconds(gateway.get(k)) for k in ("shutdown_delay", "shutdown_grace"))
    return (delay or 0.0) + (DEFAULT_SHUTDOWN_GRACE if grace is None else grace)


def _stop_timeout(table: object) -> float | None:
    """`table`'s `[supervise] stop_timeout`, when it is a number."""
    supervise = table.get("supervise") if isinstance(table, dict) else None
    return _seconds(supervise.get("stop_timeout") if isinstance(supervise, dict) else None)


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def find_llamad() -> Path:
    """This install's `llamad`: next to the running interpreter, else on PATH."""
    candidate = Path(sys.executable).parent / "llamad"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return Path(os.path.abspath(candidate))
    found = shutil.which("llamad")
    if found is None:
        raise ServiceError(f"cannot find the llamad executable next to {sys.executable} or on PATH")
    return Path(os.path.abspath(found))


def choose_manager(explicit: str | None, system: str | None = None) -> str:
    """launchd on macOS, systemd on Linux; `explicit` (the hidden --manager) wins."""
    name = system or platform.system()
    manager = explicit or {"Darwin": "launchd", "Linux": "systemd"}.get(name)
    if manager is None:
        raise ServiceError(f"no service manager for {name}", exit_code=2)
    return manager
