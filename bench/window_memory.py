"""The real model at a long context with the prompt cache on, as by default: gemma-3-270m
is a sliding-window model, and its full-size window cache would cost 2.3x at ctx 32768,
so llamad runs it as llama-server alone does. The row compares llama-server's RSS at
health under llamad with the same llama-server started directly, the cache off."""

from __future__ import annotations

import subprocess
import time

import psutil

from bench.common import Context, Result, wait_healthy
from bench.procs import Daemon, floor_specs, launch_direct, stop_direct

CTX = 32768


def row(ctx: Context, gemma: dict[str, object]) -> Result:
    """RSS at health, llamad's llama-server over the direct one; at most 1.05x. `gemma`:
    the real model's instance keys but the port."""
    port, direct_port = ctx.port(), ctx.port()
    alone = {**gemma, "port": direct_port, "ctx_size": CTX, "prompt_cache": False}
    spec = floor_specs(ctx, {"gemma": alone})[0]
    ours_keys = {**gemma, "port": port, "ctx_size": CTX}
    daemon = Daemon(ctx, "window-memory", {"gemma": ours_keys})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(launch_direct(ctx, spec, ctx.root / "window-memory-direct.log"))
        ours = daemon.wait_running(["gemma"], 180)["gemma"]
        wait_healthy([port, direct_port], time.perf_counter(), 180.0)
        rss = [_mib(ours), _mib(procs[0].pid)]
        swa_full = "LLAMA_ARG_SWA_FULL" in psutil.Process(ours).environ()
    finally:
        stop_direct(procs)
        daemon.stop()
    return Result(
        f"real model: RSS at ctx {CTX}, cache on", 1, "MiB", [rss[0]], [rss[1]], "ratio",
        "ratio", 1.05, "<= 1.05x",
        f"at health; floor: llama-server alone, same settings; swa_full {swa_full}",
        also_ok=not swa_full,
    )  # fmt: skip


def _mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20
