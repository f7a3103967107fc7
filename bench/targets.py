"""What the peer benchmarks send requests to: llama-server directly, llamad, or a peer proxy.

A target maps each model name to a base URL and knows which processes are the proxy
itself (never the llama-servers behind it), so CPU and memory count the proxy alone.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.common import http_get, wait_for


@dataclass
class Target:
    """One way to reach the models: its name, a base URL per model and its processes."""

    name: str
    bases: dict[str, str]  # model name -> "http://127.0.0.1:PORT"
    # model name -> pids of the proxy's own processes that serve that model (empty: direct)
    pids: dict[str, list[int]] = field(default_factory=dict)
    children_too: bool = False  # nginx: a master and its workers
    popens: list[subprocess.Popen[bytes]] = field(default_factory=list)
    version: str = ""
    on_stop: list[Callable[[], None]] = field(default_factory=list)
    # The direct target this one's figures are taken against, when not the run's direct:
    # a --baseline llamad fronts llama-servers of its own.
    floor: Target | None = None

    @property
    def kind(self) -> str:
        """What it is, whichever build: `llamad@c6a89fd` is a llamad, `direct@c6a89fd` a direct."""
        return self.name.partition("@")[0]

    def against(self, direct: Target) -> Target:
        """What this target's figures are taken against: its own floor, else `direct`."""
        return self.floor or direct

    def own_floors(self) -> list[Target]:
        """Its own floor, to measure in the same rounds (none when it is the run's direct)."""
        return [self.floor] if self.floor else []

    def port(self, model: str) -> int:
        """The TCP port that serves `model`."""
        return int(self.bases[model].rsplit(":", 1)[1])

    def processes(self, model: str) -> list[psutil.Process]:
        """The proxy's processes serving `model` (for nginx, its workers too)."""
        procs: list[psutil.Process] = []
        for pid in self.pids.get(model, []):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                procs.append(proc)
                if self.children_too:
                    procs += proc.children(recursive=True)
        return procs

    def cpu(self, model: str) -> float:
        """User + system CPU seconds the proxy has used so far for `model`'s processes."""
        total = 0.0
        for proc in self.processes(model):
            with contextlib.suppress(psutil.Error):
                total += cpu_seconds(proc)
        return total

    def rss_mb(self, model: str) -> float:
        """Resident memory of the proxy's processes serving `model`, in MB."""
        total = 0
        for proc in self.processes(model):
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total / 1e6

    def stop(self) -> None:
        """Stop what this target started: SIGTERM, then SIGKILL after 10 s, children too.

        A proxy's own children (a llama-server local-engine-router launched) are killed
        as well: their process groups are their own, so they would outlive it."""
        for hook in self.on_stop:
            hook()
        for popen in self.popens:
            kids: list[psutil.Process] = []
            with contextlib.suppress(psutil.Error):
                kids = psutil.Process(popen.pid).children(recursive=True)
            if popen.poll() is None:
                popen.terminate()
                try:
                    popen.wait(10)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait(5)
            for kid in kids:
                with contextlib.suppress(psutil.Error):
                    kid.kill()


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds of `proc`'s threads, to the nanosecond where Linux's
    scheduler says (`/proc/PID/task/*/schedstat`): psutil's come in clock ticks of 10 ms,
    as much as a quick run's 60 requests through nginx take in all."""
    try:
        tasks = Path(f"/proc/{proc.pid}/task").iterdir()
        return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        times = proc.cpu_times()
        return float(times.user + times.system)


def wait_answering(
    popen: subprocess.Popen[bytes], port: int, path: str, timeout: float, what: str
) -> None:
    """Wait until GET `path` answers 200; RuntimeError at once if the process exits."""

    def up() -> bool:
        if popen.poll() is not None:
            raise RuntimeError(f"{what} exited {popen.returncode} before answering")
        got = http_get(port, path, timeout=1.0)
        return got is not None and got[0] == 200

    wait_for(up, timeout, f"{what} answering on {port}")
