"""No orphans: remember every child in a state file, and reap leftovers at the next start.

On Linux PR_SET_PDEATHSIG already kills children when llamad dies. macOS has no such
thing, so a SIGKILLed llamad would leave llama-servers holding ports and memory; the
next llamad reads this file and kills those that are still the same processes (same pid
*and* create time, so a recycled pid is never hit).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import psutil
import structlog

from llamad.common.trust import owned_by_us

log = structlog.get_logger("llamad.orphans")

FILE_NAME = "children.json"


class ChildRegistry:
    """The state file of live children: pid, create time and instance."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / FILE_NAME
        self._children: dict[int, tuple[str, float]] = {}

    def add(self, name: str, pid: int) -> None:
        """Record a child just spawned."""
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

    def reap_leftovers(self, timeout: float = 5.0) -> list[int]:
        """Kill children a previous llamad left behind; returns their pids."""
        if self.path.exists() and not owned_by_us(self.path):
            # Planted by someone else: obeying it would kill whatever they name.
            log.warning("orphans.untrusted_state", path=str(self.path))
            return []
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        leftovers = []
        for entry in doc if isinstance(doc, list) else []:
            try:
                proc = psutil.Process(int(entry["pid"]))
                if abs(proc.create_time() - float(entry["create_time"])) > 0.01:
                    continue  # the pid was recycled: not ours
            except (psutil.Error, KeyError, TypeError, ValueError):
                continue
            log.warning("orphans.reaped", instance=entry.get("instance"), pid=proc.pid)
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                proc.kill()
            leftovers.append(proc)
        psutil.wait_procs(leftovers, timeout=timeout)
        self._children.clear()
        self._write()
        return [p.pid for p in leftovers]
