"""Recovery: `kill -9` (a crash) or SIGSTOP (a hang) a running child, until 200 again.

Crash: the floor is a fresh direct start of the same child, launch to 200; detection is
the kill's wall time to the `instance.exited` log timestamp. Hang: the floor is the bound
`health_interval * unhealthy_after + health_timeout` that the probe cadence promises.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from functools import partial

from bench.common import (
    Context,
    Result,
    instance_keys,
    wait_for,
    wait_gap_then_healthy,
    wait_healthy,
)
from bench.procs import Daemon, event_time, floor_specs, launch_direct, stop_direct

# Many restarts in a row are the point here: keep the flap guard out of the way.
CRASH_SUPERVISE: dict[str, object] = {"max_restarts": 1000}
INTERVAL, TIMEOUT, AFTER = 0.5, 0.5, 3
HANG_SUPERVISE: dict[str, object] = {
    "health_interval": INTERVAL,
    "health_timeout": TIMEOUT,
    "unhealthy_after": AFTER,
    "max_restarts": 1000,
}
# The probe cadence promises a kill within this many seconds of the hang.
HANG_BOUND = INTERVAL * AFTER + TIMEOUT
SETTLE = 0.2  # after a recovery, let the new child's first probes pass before the next fault


def direct_crash(ctx: Context, instances: dict[str, dict[str, object]]) -> tuple[float, float]:
    """The floors of a crash: launch to 200 directly, then kill -9 until the bench reaps it."""
    spec = floor_specs(ctx, instances)[0]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        start = time.perf_counter()
        procs.append(launch_direct(ctx, spec, ctx.root / "crash-floor.log"))
        ready = wait_healthy([spec.port], start, 30.0)
        time.sleep(0.05)
        killed = time.perf_counter()
        procs[0].kill()
        procs[0].wait(10)
        return ready, time.perf_counter() - killed
    finally:
        stop_direct(procs)


def run_crash(ctx: Context) -> list[Result]:
    """kill -9 the child: time to 200 again, and to the logged exit."""
    port = ctx.port()
    floor_instances = {"a": instance_keys(ctx, ctx.port())}
    daemon = Daemon(ctx, "crash", {"a": instance_keys(ctx, port)}, CRASH_SUPERVISE)
    recover: list[float] = []
    detect: list[float] = []
    floor: list[float] = []
    reap: list[float] = []
    try:
        pid = daemon.wait_running(["a"])["a"]
        wait_healthy([port], time.perf_counter(), 30.0)
        for _ in range(ctx.reps(10, 3)):
            ready, reaped = direct_crash(ctx, floor_instances)
            floor.append(ready * 1000)
            reap.append(reaped * 1000)
            time.sleep(SETTLE)
            wall, start = time.time(), time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            recover.append(wait_gap_then_healthy(port, start, 30.0, 1.0) * 1000)
            exited = wait_for(
                partial(daemon.events, "instance.exited", instance="a", pid=pid),
                10.0,
                "instance.exited",
            )
            detect.append((event_time(exited[-1]) - wall) * 1000)
            pid = wait_for(partial(daemon.running_pid, "a", not_pid=pid), 10.0, "new pid")
    finally:
        daemon.stop()
    note = "kill -9 -> /health 200 again; floor: fresh direct start of the same child"
    return [
        Result(
            "crash recovery", 1, "ms", recover, floor, "overhead", "overhead", 100.0,
            "<= floor +100 ms", note,
        ),
        Result(
            "crash detection", 1, "ms", detect, reap, "overhead", "none", None, "-",
            "kill -9 -> instance.exited log timestamp; floor: kill -9 -> reaped by the bench",
        ),
    ]  # fmt: skip


def run_hang(ctx: Context) -> list[Result]:
    """SIGSTOP the child: time until a new process serves 200."""
    port = ctx.port()
    daemon = Daemon(ctx, "hang", {"a": instance_keys(ctx, port)}, HANG_SUPERVISE)
    recover: list[float] = []
    new_pids: list[bool] = []
    try:
        pid = daemon.wait_running(["a"])["a"]
        wait_healthy([port], time.perf_counter(), 30.0)
        for _ in range(ctx.reps(3, 1)):
            time.sleep(SETTLE)
            start = time.perf_counter()
            os.kill(pid, signal.SIGSTOP)
            # A stopped server accepts connections but never answers: poll with a short
            # timeout so the bench's own requests do not pile up in its backlog.
            recover.append(wait_gap_then_healthy(port, start, 30.0, 0.1) * 1000)
            new = wait_for(partial(daemon.running_pid, "a", not_pid=pid), 10.0, "new pid")
            new_pids.append(new != pid)
            pid = new
    finally:
        daemon.stop()
    note = (
        "SIGSTOP -> /health 200 from a new pid; floor: the bound "
        f"health_interval {INTERVAL} x unhealthy_after {AFTER} + health_timeout {TIMEOUT}"
    )
    row = Result(
        "hang recovery", 1, "ms", recover, [HANG_BOUND * 1000], "overhead", "overhead", 100.0,
        "<= bound +100 ms", note, also_ok=all(new_pids),
    )  # fmt: skip
    row.extra["new_pid_each_time"] = all(new_pids)
    return [row]
