"""Which hosts serve each model in `llamactl fleet status`: a model routed by the
gateways of several hosts is one model with several replicas."""

from __future__ import annotations

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def replicas(statuses: list[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Model name -> its replicas, for names served by more than one: each host whose
    gateway routes it, or `host/instance` for each of a host's instances sharing it."""
    found: dict[str, list[tuple[str, str]]] = {}
    for host, status in statuses:
        if not isinstance(status.get("gateway"), dict):
            continue
        for inst in status.get("instances") or []:
            gw = inst.get("gateway") if isinstance(inst, dict) else None
            if not isinstance(gw, dict) or not gw.get("routable"):
                continue
            for name in (inst.get("name"), *(gw.get("aliases") or [])):
                if isinstance(name, str):
                    found.setdefault(name, []).append((host, str(inst.get("name"))))
    out = {}
    for name, targets in sorted(found.items()):
        hosts = [h for h, _ in targets]
        labels = [h if hosts.count(h) == 1 else f"{h}/{i}" for h, i in targets]
        if len(labels) > 1:
            out[name] = labels
    return out


def replica_lines(statuses: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """`replicas: qwen on local, studio`, one line per model with several."""
    return [f"replicas: {name} on {', '.join(hosts)}" for name, hosts in replicas(statuses).items()]
