"""What the numbers were measured on, and how busy the rest of the machine was meanwhile.

A benchmark on 2 cores is only as good as the quiet around it. `Background` measures the
CPU that processes outside the bench's tree used during a stretch: the machine's busy time
minus the bench's own (itself plus every child it reaped, and their reaped children, which
by the end of a benchmark is every process it started).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

BUSY_WARNING = 10.0  # % of the machine: above this, the figures of that stretch are suspect


def machine_info(binary: Path, version: str) -> dict[str, Any]:
    """CPU model, cores, Python, llama-server and the date."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "llama_server": str(binary),
        "llama_server_version": version,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        **source_state(),
    }


def source_state() -> dict[str, Any]:
    """The llamad checkout measured: its commit and how many files differ from it."""
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout if done.returncode == 0 else ""

    changed = [ln for ln in git("status", "--porcelain", "--", "llamad").splitlines() if ln]
    return {"llamad_commit": git("rev-parse", "HEAD").strip() or None, "llamad_changed": changed}


def _machine_busy() -> float:
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + t.irq + t.softirq)


def _ours() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Background:
    """CPU used by other processes between `__init__` and `stop()`, in % of the machine."""

    def __init__(self) -> None:
        self._start = (time.perf_counter(), _machine_busy(), _ours())

    def stop(self) -> float:
        wall = time.perf_counter() - self._start[0]
        busy = _machine_busy() - self._start[1]
        ours = _ours() - self._start[2]
        cores = os.cpu_count() or 1
        return max(0.0, (busy - ours) / (wall * cores) * 100) if wall > 0 else 0.0
