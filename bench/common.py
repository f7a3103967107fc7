"""Shared pieces of the benchmarks: the run context, configs, HTTP polls and results."""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from bench.base_build import Build

# What the "ratio/overhead" column shows, and what the target is checked against.
Compare = Literal["ratio", "overhead"]
CheckOn = Literal["ratio", "overhead", "median", "mean", "max", "none"]

T = TypeVar("T")
POLL_INTERVAL = 0.005  # the bench polls /health every 5 ms, for llamad and the floor alike


@dataclass
class Context:
    """One benchmark run: where files go, the tiny model, the binary and the repeat counts."""

    root: Path  # everything the run writes, under a tempfile dir
    short: Path  # a short directory under /tmp for AF_UNIX sockets
    model: Path
    binary: Path
    quick: bool
    soak: int | None = None  # requests in the peers' memory soak (None: the default)
    baseline: Build | None = None  # --baseline: another commit's llamad, measured beside
    # What a benchmark could not measure and why (a peer not installed, say): results.json
    notes: dict[str, str] = field(default_factory=dict)
    _ports: set[int] = field(default_factory=set)
    _dirs: int = 0

    def reps(self, full: int, quick: int) -> int:
        """The repeat count: `full` normally, `quick` with --quick."""
        return quick if self.quick else full

    def port(self) -> int:
        """A free TCP port not handed out before in this run."""
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in self._ports:
                self._ports.add(port)
                return port

    def fresh(self, name: str) -> tuple[Path, Path]:
        """A new (work dir, short socket dir) pair for one daemon or one floor."""
        self._dirs += 1
        work = self.root / f"{self._dirs:03d}-{name}"
        sock = self.short / f"{self._dirs}"
        work.mkdir(parents=True)
        sock.mkdir(mode=0o700)
        return work, sock


@dataclass
class Result:
    """One row of the table: samples against a floor measured in the same run."""

    name: str
    n: int
    unit: str
    samples: list[float]
    floor: list[float]
    compare: Compare
    check_on: CheckOn
    limit: float | None
    target: str
    note: str = ""
    also_ok: bool = True  # a condition beside the figure (e.g. pids unchanged)
    # Samples taken in (ours, floor) pairs: the ratio is the median of the pairs' ratios,
    # so a slow spell of the machine weighs on both sides of a pair alike.
    paired: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def floor_median(self) -> float:
        return statistics.median(self.floor)

    @property
    def ratio(self) -> float | None:
        if self.paired:
            return statistics.median(a / b for a, b in zip(self.samples, self.floor, strict=True))
        return self.median / self.floor_median if self.floor_median > 0 else None

    @property
    def overhead(self) -> float:
        return self.median - self.floor_median

    def value(self, on: CheckOn) -> float | None:
        """The figure `on` names (None for "none", or a ratio against a zero floor)."""
        figures: dict[CheckOn, Callable[[], float | None]] = {
            "ratio": lambda: self.ratio,
            "overhead": lambda: self.overhead,
            "median": lambda: self.median,
            "mean": lambda: statistics.mean(self.samples),
            "max": lambda: max(self.samples),
            "none": lambda: None,
        }
        return figures[on]()

    @property
    def passed(self) -> bool | None:
        """True/False against the target; None when the row is for information only."""
        if self.check_on == "none" or self.limit is None:
            return None
        value = self.value(self.check_on)
        return value is not None and value <= self.limit and self.also_ok

    def to_dict(self) -> dict[str, Any]:
        """The row as results.json stores it."""
        return {
            "name": self.name,
            "n": self.n,
            "unit": self.unit,
            "median": round(self.median, 3),
            "min": round(min(self.samples), 3),
            "max": round(max(self.samples), 3),
            "samples": [round(s, 3) for s in self.samples],
            "floor": {
                "median": round(self.floor_median, 3),
                "min": round(min(self.floor), 3),
                "max": round(max(self.floor), 3),
                "samples": [round(s, 3) for s in self.floor],
            },
            "ratio": round(self.ratio, 3) if self.ratio is not None else None,
            "overhead": round(self.overhead, 3),
            "target": self.target,
            "pass": self.passed,
            "note": self.note,
            **self.extra,
        }


def toml_value(value: object) -> str:
    """A Python value as TOML, enough for these configs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, dict):  # an inline table: an instance's env or supervise keys
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):  # e.g. [fleet] peers, as inline tables
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)


def write_config(
    path: Path,
    instances: dict[str, dict[str, object]],
    daemon: dict[str, object],
    supervise: dict[str, object] | None = None,
    gateway: dict[str, object] | None = None,
    tables: dict[str, dict[str, object]] | None = None,
) -> Path:
    """Write a llamad.toml from plain dicts (atomically: a reload must never see half);
    `tables` are more top-level tables, such as `fleet`."""
    out: list[str] = ["[daemon]", *(f"{k} = {toml_value(v)}" for k, v in daemon.items())]
    sections = {"supervise": supervise or {}, "gateway": gateway or {}, **(tables or {})}
    for section, keys in sections.items():
        if keys:
            out += [f"[{section}]", *(f"{k} = {toml_value(v)}" for k, v in keys.items())]
    for name, keys in instances.items():
        out.append(f"[instances.{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def instance_keys(ctx: Context, port: int, ctx_size: int = 256) -> dict[str, object]:
    """One tiny-model instance, small in memory: one slot, a short context."""
    return {"model": ctx.model, "port": port, "ctx_size": ctx_size, "n_parallel": 1}


def http_get(port: int, path: str = "/health", timeout: float = 1.0) -> tuple[int, bytes] | None:
    """(status, body) of one GET on 127.0.0.1, or None when nothing answers in time."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def health(port: int, timeout: float = 1.0) -> int | None:
    """The status code of GET /health, or None."""
    got = http_get(port, "/health", timeout)
    return got[0] if got else None


def wait_healthy(ports: list[int], start: float, timeout: float, per_request: float = 1.0) -> float:
    """Poll each port's /health every 5 ms; seconds from `start` until all answered 200."""
    pending = list(ports)
    deadline = start + timeout
    last = start
    while pending:
        tick = time.perf_counter()
        for port in list(pending):
            if health(port, per_request) == 200:
                pending.remove(port)
                last = time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"ports {pending} not healthy within {timeout}s")
        if pending:
            time.sleep(max(0.0, tick + POLL_INTERVAL - time.perf_counter()))
    return last - start


def wait_gap_then_healthy(port: int, start: float, timeout: float, per_request: float) -> float:
    """After a kill or a stop: wait for /health to fail once, then for the next 200."""
    deadline = start + timeout
    while health(port, per_request) == 200:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"port {port} never stopped answering")
        time.sleep(POLL_INTERVAL)
    return wait_healthy([port], start, timeout, per_request)


def wait_for(cond: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll `cond()` every 10 ms until truthy; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
    return value
