"""The status document: what `GET /v1/status` and `llamactl status --json` show."""

from __future__ import annotations

from typing import Any

import psutil

from llamad.api.cache import cache_state
from llamad.backends.registry import backend_for
from llamad.supervise.instance import Instance


class ProcessFacts:
    """RSS and CPU% of children; psutil.Process objects are kept so CPU% spans calls."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def facts(self, pid: int | None) -> tuple[int | None, float | None]:
        """(rss_bytes, cpu_percent) of `pid`, or Nones when it is gone."""
        if pid is None:
            return None, None
        proc = self._procs.get(pid)
        try:
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
                proc.cpu_percent(None)  # the first reading only sets the baseline
            with proc.oneshot():
                return proc.memory_info().rss, proc.cpu_percent(None)
        except psutil.Error:
            self._procs.pop(pid, None)
            return None, None

    def forget_except(self, live: set[int]) -> None:
        """Drop handles of processes that no instance owns any more."""
        for pid in set(self._procs) - live:
            del self._procs[pid]


def instance_doc(
    inst: Instance, facts: ProcessFacts, not_running: list[str] | None = None
) -> dict[str, Any]:
    """One entry of `instances` in the status document.

    RPC groups add keys only where they apply, so a plain config gets exactly the
    documented shape: a worker has `kind`, a head has `rpc` with its workers and whether
    the group is degraded (`not_running` lists its workers that are not running).
    """
    spec, rec = inst.spec, inst.record
    pid = inst.child.pid if inst.child is not None else None
    rss, cpu = facts.facts(pid)
    uptime = inst.uptime()
    doc = {
        "name": spec.name,
        "state": rec.state.value,
        "pid": pid,
        "host": spec.host,
        "port": spec.port,
        "model": str(spec.model) if spec.model else None,
        "restarts": rec.restarts,
        "uptime_s": round(uptime, 3) if uptime is not None else None,
        # A stopped instance's last probe is history, not health.
        "health": inst.health.to_dict() if inst.health and pid is not None else None,
        "last_exit": inst.last_exit.to_dict() if inst.last_exit else None,
        "error": rec.error,
        "rss_bytes": rss,
        "cpu_percent": cpu,
        "prompt_cache": cache_state(spec),
    }
    if spec.tool is not None:  # its own executable; the others' is `daemon.backends`
        doc["command"] = str(spec.tool.command)
    doc.update(backend_for(spec.kind).status_extras(spec))
    if spec.workers or spec.remote_workers:
        remote = [f"{peer}/{worker}" for peer, worker in spec.remote_workers]
        doc["rpc"] = {"workers": [*spec.workers, *remote], "degraded": bool(not_running)}
    return doc
