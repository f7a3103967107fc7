"""Shared test helpers: waiting on conditions, free ports, configs and a llamad subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from llamad.client.http import Client, ClientError

FAKE_SERVER = Path(__file__).with_name("fake_llama_server.py")


def _expired(began: float, timeout: float, what: str) -> None:
    if time.monotonic() - began > timeout:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll `cond` until it returns something truthy; fail after `timeout` seconds."""
    began = time.monotonic()
    while not (value := cond()):
        _expired(began, timeout, what)
        time.sleep(0.02)
    return value


async def until(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """`wait_for` for a test on the event loop: poll `cond` without blocking the loop."""
    began = time.monotonic()
    while not (value := cond()):
        _expired(began, timeout, what)
        await asyncio.sleep(0.02)
    return value


def listening_on(port: int) -> set[int | None]:
    """The processes listening on TCP `port` (a second one on a port is a double)."""
    return {
        c.pid
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    }


# Ports handed out in this run: the kernel may offer the same free port twice in a row
# while nothing has bound it yet, and two of one config's ports would then clash.
_HANDED: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on right now, not handed out before in this run."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED:
            _HANDED.add(port)
            return port


def health(port: int, timeout: float = 1.0) -> int | None:
    """The status code of GET /health, or None when nothing answers."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=timeout).status_code
    except httpx.HTTPError:
        return None


def toml_value(value: Any) -> str:
    """A Python value as TOML (enough for test configs)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def write_config(
    path: Path,
    instances: dict[str, dict[str, Any]],
    daemon: dict[str, Any] | None = None,
    supervise: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    gateway: dict[str, Any] | None = None,
) -> Path:
    """Write a llamad.toml from plain dicts."""
    out: list[str] = []
    tables = (("daemon", daemon), ("supervise", supervise), ("defaults", defaults))
    for table, values in (*tables, ("gateway", gateway)):
        if values:
            out.append(f"[{table}]")
            out += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    for name, keys in instances.items():
        out.append(f"[instances.{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


class Llamad:
    """`llamad --config FILE` as a subprocess, with its JSON log lines readable as events."""

    def __init__(
        self,
        config: Path,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        daemon = tomllib.loads(config.read_text()).get("daemon", {})
        self.socket = Path(daemon.get("socket") or Path(daemon["state_dir"]) / "llamad.sock")
        self.stderr_path = config.with_suffix(".stderr")
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llamad", "--config", str(config), "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env={**os.environ, **(env or {})},
            preexec_fn=preexec_fn,  # e.g. a low RLIMIT_NOFILE, as launchd's default
        )

    def events(self, name: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """Every JSON log event so far, filtered by event name and field values."""
        found = []
        for line in self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if name is not None and ev.get("event") != name:
                continue
            if all(ev.get(k) == v for k, v in match.items()):
                found.append(ev)
        return found

    def wait_event(self, name: str, timeout: float = 10.0, count: int = 1, **match: Any) -> Any:
        """Wait until `count` events named `name` (matching fields) have been logged."""

        def seen() -> list[dict[str, Any]] | None:
            evs = self.events(name, **match)
            return evs if len(evs) >= count else None

        return wait_for(seen, timeout, f"{count}x {name} {match}")

    def running(self, name: str) -> int | None:
        """The pid of `name` if its latest state change is to running."""
        changes = self.events("instance.state_changed", instance=name)
        if changes and changes[-1]["to"] == "running":
            return int(changes[-1]["pid"])
        return None

    def wait_running(self, name: str, timeout: float = 10.0, not_pid: int | None = None) -> int:
        """Wait until `name` is running (with a pid other than `not_pid`); returns the pid."""

        def check() -> int | None:
            pid = self.running(name)
            return pid if pid is not None and pid != not_pid else None

        return int(wait_for(check, timeout, f"{name} running"))

    def api(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        """One control-API call; returns the parsed JSON (raises on non-2xx). A call that
        waits on the daemon (`?wait=N`) needs a `timeout` longer than N."""
        return Client(self.socket).call(method, path, body, timeout)

    def status(self) -> dict[str, Any]:
        """The status document."""
        return dict(self.api("GET", "/v1/status"))

    def instance(self, name: str) -> dict[str, Any]:
        """One instance's status entry."""
        return dict(self.api("GET", f"/v1/instances/{name}"))

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Wait until the control socket answers."""

        def answers() -> bool:
            try:
                self.status()
            except ClientError:
                return False
            return True

        wait_for(answers, timeout, f"llamad answering on {self.socket}")

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `llamactl --socket SOCKET ARGS...` against this daemon."""
        return subprocess.run(
            [sys.executable, "-m", "llamad.cli.main", "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM the daemon and wait for its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def close(self) -> None:
        """Kill whatever is left (a failed test) and close files."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._stderr.close()

    def __enter__(self) -> Llamad:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def short_dir() -> Path:
    """A fresh directory under /tmp, short enough for an AF_UNIX socket path."""
    return Path(tempfile.mkdtemp(prefix="ld-", dir="/tmp"))


def lines(path: Path) -> Iterator[str]:
    """Lines of a text file, empty when it does not exist."""
    if path.exists():
        yield from path.read_text(encoding="utf-8", errors="replace").splitlines()


def import_probe(argv: list[str], heavy: tuple[str, ...]) -> subprocess.CompletedProcess[bytes]:
    """`llamactl argv` in a fresh interpreter; its last line of stdout is the JSON
    [exit code, the names in `heavy` that it imported]."""
    probe = (
        "import sys, json; from llamad.cli.main import run; "
        f"code = run({argv!r}); "
        f"print(json.dumps([code, [m for m in {heavy!r} if m in sys.modules]]))"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=30
    )


def stand_in_binary(path: Path, real: Path, serve: str | None = None, note: str = "first") -> None:
    """A llama-server that answers --help/--version/--list-devices as the real one does
    and, unless `serve` says otherwise, serves with it too; replaced atomically, as an
    upgrade does."""
    body = serve if serve is not None else f'exec "{real}" "$@"'
    tmp = path.with_suffix(".new")
    answers = f'case "$1" in --help|--version|--list-devices) exec "{real}" "$@";; esac'
    tmp.write_text(f"#!/bin/sh\n# {note}\n{answers}\n{body}\n")
    tmp.chmod(0o755)
    os.replace(tmp, path)


def record_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every subprocess.run argv from now on (each still run): what read a binary."""
    calls: list[list[str]] = []
    real_run = subprocess.run

    def run(args: list[str], **kwargs: Any) -> Any:
        calls.append(args)
        return real_run(args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return calls
