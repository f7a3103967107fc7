"""Status latency: the wall time of `llamactl status --json` against 16 running instances.

The floor is `python -c pass` with the same interpreter: the least any Python CLI costs.
The two are interleaved, 20 runs each, so a busy moment hits both alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Context, Result, instance_keys
from bench.procs import Daemon, daemon_env

N = 16


def llamactl() -> list[str]:
    """The console script next to this interpreter, else the module."""
    script = Path(sys.executable).parent / "llamactl"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "llamad.cli.main"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Milliseconds from launch to exit, and what the command did."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return (time.perf_counter() - start) * 1000, done


def run(ctx: Context) -> list[Result]:
    """20 interleaved runs of `llamactl status --json` and `python -c pass`."""
    instances = {f"i{k:02d}": instance_keys(ctx, ctx.port()) for k in range(N)}
    daemon = Daemon(ctx, "status", instances)
    env = daemon_env(ctx)
    argv = [*llamactl(), "--socket", str(daemon.socket), "status", "--json"]
    floor_argv = [sys.executable, "-c", "pass"]
    ours: list[float] = []
    floor: list[float] = []
    try:
        daemon.wait_running(list(instances), timeout=90.0)
        time.sleep(0.5)
        timed(argv, env)  # warm-up: pyc files and page cache, not counted
        timed(floor_argv, env)
        for _ in range(ctx.reps(20, 5)):
            took, done = timed(argv, env)
            if done.returncode != 0:
                raise RuntimeError(f"llamactl status exited {done.returncode}: {done.stderr}")
            doc = json.loads(done.stdout)
            if len(doc["instances"]) != N:
                raise RuntimeError(f"status listed {len(doc['instances'])} instances, not {N}")
            ours.append(took)
            floor.append(timed(floor_argv, env)[0])
    finally:
        daemon.stop()
    return [
        Result(
            "llamactl status --json", N, "ms", ours, floor, "ratio", "ratio", 5.0,
            "<= 5x floor", "floor: python -c pass (same interpreter)",
        )
    ]  # fmt: skip
