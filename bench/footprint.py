"""Footprint: llamad's memory (RSS, USS) and idle CPU with 1, 8 and 32 instances.

The floor is a Python process that imports the same third-party stack llamad runs on
and idles in an asyncio loop, sampled the same way over the same window: what is left
over is llamad's own cost. CPU is cpu_times (user + system, all threads) over wall time,
in % of one core, cut into 5 s slices (one health_interval each). The three daemons run
side by side to fit the whole bench in three minutes (see `measure`).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import psutil

from bench.base_build import Build
from bench.baseline import builds, twin
from bench.common import Context, Result, instance_keys
from bench.procs import Daemon, daemon_env

# llamad without a gateway loads httpx only for a pull: not part of its idle stack.
FLOOR_CODE = (
    "import asyncio, httptools, prometheus_client, psutil, pydantic_settings, starlette, "
    "structlog, uvloop, watchfiles; print('ready', flush=True); "
    "asyncio.run(asyncio.sleep(3600))"
)
SLICE = 5.0  # seconds: the default health_interval, so each slice holds one probe round
SETTLE = 1.0  # after the last instance is running: readiness polls over, liveness begun
MB = 1024 * 1024


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _memory(proc: psutil.Process) -> tuple[float, float]:
    info = proc.memory_full_info()
    return info.rss / MB, info.uss / MB


class Sampler:
    """Memory samples and per-slice CPU% of one process."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.rss: list[float] = []
        self.uss: list[float] = []
        self.cpu: list[float] = []
        self._mark = (time.perf_counter(), _cpu(self.proc))

    def memory(self) -> None:
        rss, uss = _memory(self.proc)
        self.rss.append(rss)
        self.uss.append(uss)

    def cut(self) -> None:
        """Close a CPU slice at now."""
        now, cpu = time.perf_counter(), _cpu(self.proc)
        self.cpu.append((cpu - self._mark[1]) / (now - self._mark[0]) * 100)
        self._mark = (now, cpu)


def measure(
    ctx: Context, windows: dict[int, float]
) -> dict[tuple[Build, int], tuple[Sampler, Sampler]]:
    """Start one llamad per N (and the floor), each build's with --baseline; sample each
    over its own idle window.

    The daemons idle side by side, which saves a start and a window per N: each costs
    well under 5 % of a core, and each is charged only its own CPU time. None is stopped
    before the last window ends, so no shutdown burst lands inside a window.
    """
    floor = subprocess.Popen(
        [sys.executable, "-c", FLOOR_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env=daemon_env(ctx),
    )
    daemons: dict[tuple[Build, int], Daemon] = {}
    try:
        for n in windows:
            for build in builds(ctx):
                instances = {f"i{k:02d}": instance_keys(ctx, ctx.port()) for k in range(n)}
                daemons[build, n] = Daemon(ctx, f"idle{n}", instances, build=build)
        assert floor.stdout is not None
        floor.stdout.readline()
        for (_, n), daemon in daemons.items():
            daemon.wait_running([f"i{k:02d}" for k in range(n)], timeout=120.0)
        time.sleep(SETTLE)
        pairs = {key: (Sampler(d.proc.pid), Sampler(floor.pid)) for key, d in daemons.items()}
        end = time.perf_counter()
        for k in range(max(1, round(max(windows.values()) / SLICE))):
            live = [p for (_, n), p in pairs.items() if k * SLICE < windows[n] - 1e-6]
            for ours, base in live:
                ours.memory()
                base.memory()
            end += SLICE
            time.sleep(max(0.0, end - time.perf_counter()))
            for ours, base in live:
                ours.cut()
                base.cut()
        return pairs
    finally:
        for daemon in daemons.values():
            daemon.stop()
        floor.kill()
        floor.wait(10)
        if floor.stdout:
            floor.stdout.close()


def run(ctx: Context) -> list[Result]:
    """RSS/USS at N = 1, 8, 32; idle CPU over 10 s (N = 1, 32) and 30 s (N = 8)."""
    results: list[Result] = []
    windows = {1: 10.0, 8: 30.0, 32: 10.0} if not ctx.quick else {1: 5.0, 8: 5.0, 32: 5.0}
    for (build, n), (ours, base) in measure(ctx, windows).items():
        results += [twin(r, build) for r in _rows(n, windows[n], ours, base)]
    return results


def _rows(n: int, window: float, ours: Sampler, base: Sampler) -> list[Result]:
    rss = Result("footprint RSS", n, "MB", ours.rss, base.rss, "overhead", "none", None, "-")
    if n == 32:
        rss.check_on, rss.limit, rss.target = "median", 60.0, "<= 60 MB"
    rss.note = "floor: python importing llamad's libraries, idle"
    uss = Result("footprint USS", n, "MB", ours.uss, base.uss, "overhead", "none", None, "-")
    cpu = Result("idle CPU", n, "%", ours.cpu, base.cpu, "overhead", "none", None, "-")
    if n == 8:
        cpu.check_on, cpu.limit, cpu.target = "mean", 0.5, "<= 0.5 % (mean)"
    whole = statistics.mean(ours.cpu)
    cpu.note = (
        f"% of one core over {window:g} s idle ({len(ours.cpu)} slices of "
        f"{window / len(ours.cpu):g} s), whole window {whole:.3f} %; "
        "the N = 1, 8, 32 daemons idled side by side"
    )
    cpu.extra["whole_window_percent"] = round(whole, 4)
    cpu.extra["window_s"] = window
    return [rss, uss, cpu]
