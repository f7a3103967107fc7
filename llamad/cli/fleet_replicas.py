"""Which hosts serve each model in `llamactl fleet status`: a model routed by the
gateways of several hosts is one model with several replicas."""

from __future__ import annotations

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def replicas(statuses: list[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Model name -> the hosts whose gateway routes it, for names served by more than
    one (an instance's name or alias; one host counts once however many it has)."""
    hosts: dict[str, list[str]] = {}
    for host, status in statuses:
        if not isinstance(status.get("gateway"), dict):
            continue
        for inst in status.get("instances") or []:
            gw = inst.get("gateway") if isinstance(inst, dict) else None
            if not isinstance(gw, dict) or not gw.get("routable"):
                continue
            for name in (inst.get("name"), *(gw.get("aliases") or [])):
                if isinstance(name, str) and host not in hosts.setdefault(name, []):
                    hosts[name].append(host)
    return {name: found for name, found in sorted(hosts.items()) if len(found) > 1}


def replica_lines(statuses: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """`replicas: qwen on local, studio`, one line per model with several."""
    return [f"replicas: {name} on {', '.join(hosts)}" for name, hosts in replicas(statuses).items()]
