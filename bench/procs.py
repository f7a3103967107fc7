"""Processes the benchmarks start: llamad with JSON logs, and llama-server launched directly."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.base_build import CURRENT, Build
from bench.common import Context, wait_for, wait_healthy, write_config
from llamad.client.http import Client, ClientError
from llamad.common.childenv import child_env
from llamad.config.load import load


def daemon_env(ctx: Context) -> dict[str, str]:
    """The environment of every llamad: its cache and state kept inside the run's temp dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMAD_", "NOTIFY_"))}
    # An installed llamad runs from bytecode compiled at install time; an environment that
    # forbids writing it would have every daemon compile ~70 modules again (~70 ms), which
    # no installed llamad does. The warm-up run writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["XDG_CACHE_HOME"] = str(ctx.root / "cache")
    env["XDG_STATE_HOME"] = str(ctx.root / "state")
    return env


class Daemon:
    """`python -m llamad --config FILE --log-format json`, its events read from stderr;
    `build` says whose llamad (this checkout's, or --baseline's)."""

    def __init__(
        self,
        ctx: Context,
        name: str,
        instances: dict[str, dict[str, object]],
        supervise: dict[str, object] | None = None,
        gateway: dict[str, object] | None = None,
        daemon: dict[str, object] | None = None,
        tables: dict[str, dict[str, object]] | None = None,
        build: Build = CURRENT,
    ) -> None:
        self.work, sock_dir = ctx.fresh(name)
        self.socket = sock_dir / "s"
        # Beside a baseline every daemon names the binary: the old commit's virtualenv has
        # no llama.cpp wheel to find one in, and old and new run the same config.
        binary = {"llama_server": ctx.binary} if ctx.baseline else {}
        self.daemon_keys: dict[str, object] = {
            "state_dir": self.work / "state",
            "socket": self.socket,
            **binary,
            **(daemon or {}),
        }
        self.supervise, self.gateway, self.tables = supervise, gateway, tables
        self.config = write_config(
            self.work / "llamad.toml", instances, self.daemon_keys, supervise, gateway, tables
        )
        self.stderr_path = self.work / "llamad.stderr"
        self._stderr = self.stderr_path.open("wb")
        self._events: list[dict[str, Any]] = []
        self._offset = 0
        self.started = time.perf_counter()
        self.started_wall = time.time()
        self.proc = subprocess.Popen(
            [build.python, "-m", "llamad", "--config", str(self.config), "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=build.env(daemon_env(ctx)),
            cwd=build.cwd(self.work),
        )

    def rewrite(
        self, instances: dict[str, dict[str, object]], daemon: dict[str, object] | None = None
    ) -> None:
        """Save a new config the way an editor does: write aside, rename over; `daemon`
        changes `[daemon]` keys (a new llama_server, say)."""
        keys = {**self.daemon_keys, **(daemon or {})}
        write_config(self.config, instances, keys, self.supervise, self.gateway, self.tables)

    def events(self, name: str, **match: object) -> list[dict[str, Any]]:
        """Every JSON log event named `name` so far whose fields match."""
        with self.stderr_path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            try:
                self._events.append(json.loads(line))
            except ValueError:
                continue
        return [
            ev
            for ev in self._events
            if ev.get("event") == name and all(ev.get(k) == v for k, v in match.items())
        ]

    def running_pid(self, instance: str, not_pid: int | None = None) -> int | None:
        """The pid of `instance` if its latest state change went to running."""
        changes = self.events("instance.state_changed", instance=instance)
        if changes and changes[-1]["to"] == "running" and changes[-1]["pid"] != not_pid:
            return int(changes[-1]["pid"])
        return None

    def wait_running(self, names: list[str], timeout: float = 60.0) -> dict[str, int]:
        """Wait until every instance in `names` is running; their pids."""

        def pids() -> dict[str, int] | None:
            found = {n: self.running_pid(n) for n in names}
            done = {n: p for n, p in found.items() if p is not None}
            return done if len(done) == len(names) else None

        return wait_for(pids, timeout, f"{names} running")

    def status(self) -> dict[str, Any]:
        """The status document, over the control socket."""
        return dict(Client(self.socket).call("GET", "/v1/status"))

    def wait_socket(self, timeout: float = 30.0) -> None:
        """Wait until the control socket answers."""

        def answers() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llamad exited {self.proc.returncode}: see {self.stderr_path}")
            try:
                self.status()
            except ClientError:
                return False
            return True

        wait_for(answers, timeout, "llamad control socket")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM and wait; SIGKILL (children die with it: PDEATHSIG) past `timeout`."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
        finally:
            self._stderr.close()


def event_time(event: dict[str, Any]) -> float:
    """A log event's ISO timestamp as seconds since the epoch."""
    return dt.datetime.fromisoformat(str(event["timestamp"])).timestamp()


@dataclass(frozen=True)
class Launch:
    """What llamad would run for one instance: its port, extra argv and whole environment."""

    port: int
    args: tuple[str, ...]
    env: dict[str, str]


def floor_specs(ctx: Context, instances: dict[str, dict[str, object]]) -> list[Launch]:
    """Resolve the instances with llamad's own config code, so the floor runs the same thing."""
    work, sock = ctx.fresh("floor")
    path = write_config(
        work / "llamad.toml", instances, {"state_dir": work / "state", "socket": sock / "s"}
    )
    base = daemon_env(ctx)
    specs = list(load(path).instances.values())
    for s in specs:  # llamad makes the prompt cache's directory before it launches
        if s.prompt_cache is not None:
            s.prompt_cache.mkdir(parents=True, exist_ok=True)
    return [
        Launch(s.port, tuple(s.args), child_env(base, dict(s.settings), dict(s.env))) for s in specs
    ]


def launch_direct(ctx: Context, spec: Launch, log: Path) -> subprocess.Popen[bytes]:
    """llama-server exactly as llamad runs it (argv and LLAMA_* env), but started by us."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(ctx.binary), *spec.args],
            env=spec.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def direct_start(ctx: Context, instances: dict[str, dict[str, object]]) -> float:
    """Seconds from launching one instance's llama-server directly until it answers 200."""
    spec = floor_specs(ctx, instances)[0]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        start = time.perf_counter()
        procs.append(launch_direct(ctx, spec, ctx.root / f"direct-{spec.port}.log"))
        return wait_healthy([spec.port], start, 30.0)
    finally:
        stop_direct(procs)


def stop_direct(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL direct children and reap them."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.wait(10)


def leftover_children(grace: float = 5.0) -> list[psutil.Process]:
    """Descendants of the bench still alive after `grace` seconds; killed before returning."""
    me = psutil.Process()
    deadline = time.monotonic() + grace
    left = me.children(recursive=True)
    while left and time.monotonic() < deadline:
        left = [p for p in left if _alive(p)]
        time.sleep(0.05)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return left


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
