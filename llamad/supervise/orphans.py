"""No orphans: remember every child in a state file, and reap leftovers at the next start.

On Linux PR_SET_PDEATHSIG already kills children when llamad dies. macOS has no such
thing, so a SIGKILLed llamad would leave llama-servers holding ports and memory; the
next llamad reads this file and kills those that are still the same processes (same pid
*and* create time, so a recycled pid is never hit).

A llamad killed between a spawn and its record leaves a child the file never names, so
every child also carries MARKER_ENV=<hash of the state dir> in its environment: the next
llamad on that state dir (it holds the daemon lock, so no live llamad owns such a child)
reaps those too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from llamad.common.trust import owned_by_us

if TYPE_CHECKING:
    import psutil

log = structlog.get_logger("llamad.orphans")

FILE_NAME = "children.json"
MARKER_ENV = "LLAMAD_DAEMON"


def marker(state_dir: Path) -> str:
    """The MARKER_ENV value of children of the llamad using `state_dir`."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]


class ChildRegistry:
    """The state file of live children: pid, create time and instance."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / FILE_NAME
        self._children: dict[int, tuple[str, float]] = {}
        self.marker = marker(state_dir)

    def env(self) -> dict[str, str]:
        """The environment entry that marks a child as this daemon's."""
        return {MARKER_ENV: self.marker}

    def add(self, name: str, pid: int) -> None:
        """Record a child just spawned."""
        # psutil is imported where a process is looked at: a clean start (no leftovers)
        # then launches its first child without it.
        import psutil

        try:
            created = psutil.Process(pid).create_time()
        except (psutil.Error, OSError):  # OSError: out of descriptors reading /proc
            return
        self._children[pid] = (name, created)
        self._write()

    def remove(self, pid: int) -> None:
        """Forget a child that has been reaped."""
        if self._children.pop(pid, None) is not None:
            self._write()

    def _write(self) -> None:
        doc = [{"pid": p, "instance": n, "create_time": c} for p, (n, c) in self._children.items()]
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:  # losing this file only weakens orphan cleanup
            log.warning("orphans.state_unwritable", path=str(self.path), error=str(exc))

    def reap_leftovers(self, timeout: float = 5.0, scan: bool = True) -> list[int]:
        """Kill children a previous llamad left behind; returns their pids. With `scan`,
        also every process carrying our marker (a look at every process: tens of ms)."""
        found = {**self._recorded(), **(self._marked() if scan else {})}
        if found:
            _kill(found, timeout)
        self._children.clear()
        self._write()
        return list(found)

    def _recorded(self) -> dict[int, tuple[psutil.Process, str | None]]:
        if self.path.exists() and not owned_by_us(self.path):
            # Planted by someone else: obeying it would kill whatever they name.
            log.warning("orphans.untrusted_state", path=str(self.path))
            return {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not doc:
            return {}  # the last llamad stopped its children
        import psutil

        found = {}
        for entry in doc if isinstance(doc, list) else []:
            try:
                proc = psutil.Process(int(entry["pid"]))
                if abs(proc.create_time() - float(entry["create_time"])) > 0.01:
                    continue  # the pid was recycled: not ours
            except (psutil.Error, KeyError, TypeError, ValueError):
                continue
            found[proc.pid] = (proc, entry.get("instance"))
        return found

    def _marked(self) -> dict[int, tuple[psutil.Process, str | None]]:
        import psutil

        # Our own ancestors may carry the marker (llamad run from a child's shell).
        skip = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
        found: dict[int, tuple[psutil.Process, str | None]] = {}
        for proc in psutil.process_iter():
            try:
                if proc.pid not in skip and proc.environ().get(MARKER_ENV) == self.marker:
                    found[proc.pid] = (proc, None)
            except psutil.Error:
                continue  # gone, a zombie, or another user's process
        return found


def _kill(found: dict[int, tuple[psutil.Process, str | None]], timeout: float) -> None:
    """SIGKILL each leftover's process group and the process, then wait for them."""
    import psutil

    for proc, instance in found.values():
        log.warning("orphans.reaped", instance=instance, pid=proc.pid)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs([proc for proc, _ in found.values()], timeout=timeout)
