"""Cold start: from launching llamad until all N instances answer 200 on /health.

The floor is the same llama-server commands (argv and LLAMA_* environment resolved by
llamad's own config code) launched in parallel by the bench; both are polled by the bench,
every port every 5 ms, so the only difference is llamad itself.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from dataclasses import dataclass

import psutil

from bench.base_build import CURRENT, Build
from bench.baseline import builds, turned, twin
from bench.common import Context, Result, instance_keys, wait_healthy
from bench.procs import Daemon, event_time, floor_specs, launch_direct, stop_direct

TIMEOUT = 90.0  # 32 tiny servers on 2 cores take about 9 s


def _instances(ctx: Context, n: int) -> dict[str, dict[str, object]]:
    return {f"i{k:02d}": instance_keys(ctx, ctx.port()) for k in range(n)}


def _ports(instances: dict[str, dict[str, object]]) -> list[int]:
    return [int(str(keys["port"])) for keys in instances.values()]


def floor_once(ctx: Context, n: int) -> float:
    """Seconds from launching N llama-servers directly until all answer 200."""
    instances = _instances(ctx, n)
    specs = floor_specs(ctx, instances)  # resolved before the clock starts
    log = ctx.root / f"floor-{n}.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        start = time.perf_counter()
        procs += [launch_direct(ctx, spec, log) for spec in specs]
        return wait_healthy(_ports(instances), start, TIMEOUT)
    finally:
        stop_direct(procs)


@dataclass
class Run:
    """One llamad cold start: the figure, plus where the time went."""

    ready: float  # launch -> every port answers 200, seconds
    first_spawn: float  # launch -> first instance.state_changed to starting, seconds
    cpu: float  # CPU seconds llamad used by then (imports, config, spawns, readiness polls)


def daemon_once(ctx: Context, n: int, build: Build = CURRENT) -> Run:
    """Launch `build`'s llamad with N instances; time until all answer 200."""
    instances = _instances(ctx, n)
    daemon = Daemon(ctx, f"cold{n}", instances, build=build)
    try:
        ready = wait_healthy(_ports(instances), daemon.started, TIMEOUT)
        times = psutil.Process(daemon.proc.pid).cpu_times()
        spawns = daemon.events("instance.state_changed", to="starting")
        first = min(event_time(ev) for ev in spawns) - daemon.started_wall
        return Run(ready, first, times.user + times.system)
    finally:
        daemon.stop()


def _measure(ctx: Context, n: int, reps: int) -> tuple[dict[Build, list[Run]], list[float]]:
    ours: dict[Build, list[Run]] = {b: [] for b in builds(ctx)}
    floor: list[float] = []
    order: list[Build | None] = [None, *ours]  # None: the floor
    for i in range(reps):
        # Turn which goes first, so a warm page cache or a busy moment favours none.
        for build in turned(order, i):
            if build is None:
                floor.append(floor_once(ctx, n))
            else:
                ours[build].append(daemon_once(ctx, n, build))
        time.sleep(0.1)
    return ours, floor


def run(ctx: Context) -> list[Result]:
    """Cold start at N = 1, 8 and 32 (each llamad's, with --baseline)."""
    # Warm-up, not counted: the first llamad pays for cold page caches and pyc files.
    for build in builds(ctx):
        daemon_once(ctx, 1, build)
    floor_once(ctx, 1)
    results: list[Result] = []
    for n, reps, quick in ((1, 5, 2), (8, 5, 2), (32, 3, 1)):
        got, floor_s = _measure(ctx, n, ctx.reps(reps, quick))
        results += [twin(_row(n, runs, floor_s), build) for build, runs in got.items()]
    return results


def _row(n: int, runs: list[Run], floor_s: list[float]) -> Result:
    ours = [r.ready * 1000 for r in runs]
    floor = [f * 1000 for f in floor_s]
    if n == 1:
        row = Result(
            "cold start", n, "ms", ours, floor, "overhead", "overhead", 250.0, "<= +250 ms"
        )
    elif n == 8:
        row = Result("cold start", n, "ms", ours, floor, "ratio", "ratio", 1.10, "<= 1.10x")
    else:
        row = Result("cold start", n, "ms", ours, floor, "ratio", "none", None, "-")
    spawn = statistics.median(r.first_spawn for r in runs) * 1000
    cpu = statistics.median(r.cpu for r in runs) * 1000
    row.note = (
        "launch -> all /health 200; floor: same commands launched directly; "
        f"llamad launch -> first spawn {spawn:.0f} ms, llamad CPU until ready {cpu:.0f} ms"
    )
    row.extra["launch_to_first_spawn_ms"] = [round(r.first_spawn * 1000, 1) for r in runs]
    row.extra["llamad_cpu_ms"] = [round(r.cpu * 1000, 1) for r in runs]
    return row
