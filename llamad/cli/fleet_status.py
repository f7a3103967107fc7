"""`llamactl fleet status`: every known llamad at once, one table, version skew flagged.

Exit codes: 0 every host answered and every instance runs, 3 every host answered but
some instance is not running, 4 some host could not be queried (unreachable, or it
refused the token). A host found by mDNS that refuses the token is someone else's llamad:
listed as refused, it counts for none of them.
"""

from __future__ import annotations

import errno
import os
import sys

from llamad.cli import cells, exits, table
from llamad.cli.fleet_hosts import Host, hosts_of, query
from llamad.cli.fleet_replicas import replica_lines, replicas
from llamad.fleet import peers

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

_MISSING = {os.strerror(errno.ENOENT), os.strerror(errno.ECONNREFUSED)}


def _keep(host: Host, seen: set[tuple[Any, ...] | None]) -> bool:
    if (
        host.source == "local"
        and host.unreachable
        and any(m in (host.error or "") for m in _MISSING)
    ):
        return False  # no daemon on this machine: not a problem for a fleet view
    identity = peers.identity(host.status)
    if host.status is not None and identity in seen and host.source in ("mdns", "tailscale"):
        return False  # found again by discovery: the same daemon as a host listed already
    seen.add(identity)
    return True


def skew(hosts: list[Host]) -> dict[str, dict[str, list[str]]]:
    """{"llamad": {version: [hosts]}, "llama_server": {...}} for each that differs."""
    out = {}
    for key, field in (("llamad", "version"), ("llama_server", "llama_server_version")):
        seen: dict[str, list[str]] = {}
        for host in hosts:
            if host.status is not None:
                value = str((host.status.get("daemon") or {}).get(field) or "unknown")
                seen.setdefault(value.removeprefix("version: "), []).append(host.name)
        if len(seen) > 1:
            out[key] = seen
    return out


def render(hosts: list[Host], skews: dict[str, dict[str, list[str]]], colour: bool) -> str:
    """HOST plus the status table's columns; reasons, problems and skew below it."""
    rows, notes = [["HOST", *table.COLUMNS]], []
    for host in hosts:
        if host.status is None:
            state = "unreachable" if host.unreachable else "refused" if host.refused else "error"
            rows.append([host.name, "-", state] + ["-"] * (len(table.COLUMNS) - 2))
            stranger = " (found by mDNS: not in the exit code)" if host.stranger else ""
            notes.append(f"{host.name}: {host.error}{stranger}")
            continue
        instances = host.status.get("instances") or []
        rows += [[host.name, *table.row(inst)] for inst in instances]
        if not instances:
            rows.append([host.name, "(none)"] + ["-"] * (len(table.COLUMNS) - 1))
        gateway = gateway_line(host.status)
        if gateway:
            notes.append(f"{host.name}: {gateway}")
        error = (host.status.get("daemon") or {}).get("config_error")
        if error:
            notes.append(f"{host.name}: warning: config not applied: {error}")
        for inst in instances:
            why = table.problem(inst) if inst.get("state") != "running" else None
            if why:
                notes.append(f"{host.name}/{inst.get('name')}: {why}")
    notes += replica_lines([(h.name, h.status) for h in hosts if h.status is not None])
    if not hosts:
        notes.append("(no hosts: add [fleet] peers or a tailscale_tag, or use --discover)")
    what = {"llamad": "llamad versions", "llama_server": "llama.cpp builds"}
    for key, versions in skews.items():
        parts = "; ".join(f"{v} on {', '.join(names)}" for v, names in versions.items())
        notes.append(f"warning: {what[key]} differ: {parts}")
    return "\n".join(cells.grid(rows, 2, colour) + notes)


def gateway_line(status: dict[str, Any]) -> str | None:
    """`gateway 127.0.0.1:8080, loaded: a, b` for a host that serves a gateway."""
    gateway = status.get("gateway")
    if not isinstance(gateway, dict):
        return None
    loaded = [
        str(i.get("name"))
        for i in status.get("instances") or []
        if i.get("gateway") and i.get("state") == "running"
    ]
    return f"gateway {gateway.get('listen')}, loaded: {', '.join(loaded) or 'none'}"


def fleet_status(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Run `llamactl fleet status`; returns the exit code (see the module docstring)."""
    fleet = peers.load_fleet(args.config)
    timeout = args.timeout or fleet.timeout
    hosts = hosts_of(args, fleet, timeout)
    query(hosts, timeout)
    seen: set[tuple[Any, ...] | None] = set()
    hosts = [h for h in hosts if _keep(h, seen)]
    skews = skew(hosts)
    if args.json:
        import json

        docs = [
            {"host": h.name, "url": h.where, "source": h.source, "reachable": h.status is not None}
            | {"refused": h.refused, "error": h.error, "status": h.status}
            for h in hosts
        ]
        served = replicas([(h.name, h.status) for h in hosts if h.status is not None])
        out(json.dumps({"hosts": docs, "skew": skews, "replicas": served}, indent=2))
    else:
        out(render(hosts, skews, table.use_colour(sys.stdout)))
    ours = [h for h in hosts if not h.stranger]
    statuses = [h.status for h in ours if h.status is not None]
    if len(statuses) < len(ours):
        return exits.UNKNOWN
    running = (i.get("state") == "running" for s in statuses for i in s.get("instances") or [])
    return exits.OK if all(running) else exits.NOT_RUNNING
