"""Reload: rename a new config over the old one, changing one instance's ctx_size.

Timed from the rename until the changed instance answers 200 on /health and /props shows
the new n_ctx. The floor is a direct start of llama-server with that setting. Meanwhile a
client hammers the two unchanged instances: their pids must stay and no request may fail.
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from typing import Any

from bench.common import (
    POLL_INTERVAL,
    Context,
    Result,
    health,
    http_get,
    instance_keys,
    wait_for,
    wait_healthy,
)
from bench.procs import Daemon, direct_start

SIZES = (512, 256)  # ctx_size of the changed instance, alternating; it starts at 256


class Hammer(threading.Thread):
    """GET /health on each port back to back (5 ms apart), counting what fails."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(name="hammer", daemon=True)
        self.ports = ports
        self.ok = 0
        self.failed = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            for port in self.ports:
                if health(port, 2.0) == 200:
                    self.ok += 1
                else:
                    self.failed += 1
            self._done.wait(POLL_INTERVAL)

    def stop(self) -> None:
        self._done.set()
        self.join(10)


def serves(port: int, n_ctx: int) -> bool:
    """True when the server on `port` is ready and runs with context size `n_ctx`."""
    if health(port) != 200:
        return False
    got = http_get(port, "/props")
    if got is None or got[0] != 200:
        return False
    return bool(json.loads(got[1])["default_generation_settings"]["n_ctx"] == n_ctx)


def wait_serves(port: int, n_ctx: int, start: float, timeout: float) -> float:
    """Seconds from `start` until `serves(port, n_ctx)`, polled every 5 ms."""
    while not serves(port, n_ctx):
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"port {port} never served n_ctx {n_ctx}")
        time.sleep(POLL_INTERVAL)
    return time.perf_counter() - start


def _reloads(daemon: Daemon, count: int) -> list[dict[str, Any]] | None:
    evs = daemon.events("config.reloaded")
    return evs if len(evs) >= count else None


def run(ctx: Context) -> list[Result]:
    """Five reloads, each changing instance a's ctx_size; b and c are left alone."""
    pa, pb, pc = ctx.port(), ctx.port(), ctx.port()
    floor_port = ctx.port()

    def config(size: int) -> dict[str, dict[str, object]]:
        return {
            "a": instance_keys(ctx, pa, size),
            "b": instance_keys(ctx, pb),
            "c": instance_keys(ctx, pc),
        }

    daemon = Daemon(ctx, "reload", config(256))
    hammer = Hammer([pb, pc])
    took: list[float] = []
    floor: list[float] = []
    fails: list[float] = []
    changed_only_a = True
    try:
        before = daemon.wait_running(["a", "b", "c"])
        wait_healthy([pa, pb, pc], time.perf_counter(), 30.0)
        hammer.start()
        for i in range(ctx.reps(5, 2)):
            size = SIZES[i % 2]
            floor.append(direct_start(ctx, {"a": instance_keys(ctx, floor_port, size)}) * 1000)
            time.sleep(0.3)
            failed = hammer.failed
            start = time.perf_counter()
            daemon.rewrite(config(size))
            took.append(wait_serves(pa, size, start, 30.0) * 1000)
            reloads = wait_for(partial(_reloads, daemon, i + 1), 10.0, "config.reloaded")
            changed_only_a &= reloads[i].get("changed") == ["a"]
            time.sleep(0.2)  # an unchanged instance blinking just after would count too
            fails.append(float(hammer.failed - failed))
        after = {n: daemon.running_pid(n) for n in ("b", "c")}
    finally:
        if hammer.is_alive():
            hammer.stop()
        daemon.stop()
    same_pids = all(after[n] == before[n] for n in ("b", "c"))
    overhead = Result(
        "reload", 1, "ms", took, floor, "overhead", "overhead", 300.0, "<= floor +300 ms",
        "rename -> /health 200 with the new n_ctx; floor: direct start with that setting",
    )  # fmt: skip
    overhead.extra["only_a_changed"] = changed_only_a
    steady = Result(
        "reload: unchanged failed req", 2, "req", fails, [0.0], "overhead", "max", 0.0,
        "0, pids kept",
        f"{hammer.ok} requests OK to b and c; pids unchanged: {same_pids}",
        also_ok=same_pids,
    )  # fmt: skip
    steady.extra.update(
        pids_unchanged=same_pids, requests_ok=hammer.ok, requests_failed_total=hammer.failed
    )
    return [overhead, steady]
