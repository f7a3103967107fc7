"""`llamactl fleet status`: every known llamad at once, one table, version skew flagged.

Hosts are the local daemon (when it answers on its socket), `[fleet] peers`, tagged
Tailscale peers and, with --discover, what mDNS finds. Each is asked in its own daemon
thread with a per-host timeout, and the command stops waiting at the deadline whatever
the threads are doing, so one dead host can never hang it.

Exit codes: 0 every host answered and every instance runs, 3 every host answered but
some instance is not running, 4 some host could not be queried (unreachable, or it
refused the token).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from llamad.cli import exits, table
from llamad.cli.fleet_replicas import replica_lines, replicas
from llamad.client.http import Client, ClientError, Unreachable, find_socket
from llamad.fleet import peers

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

SLACK_S = 0.25  # past the per-host timeout, before a silent host is given up on
DISCOVER_S = 1.0
_MISSING = {os.strerror(errno.ENOENT), os.strerror(errno.ECONNREFUSED)}


@dataclass
class Host:
    """One daemon to ask, then what it said (status) or why not (error)."""

    name: str
    where: str
    source: str
    connect: Callable[[], Client] | None
    status: dict[str, Any] | None = None
    error: str | None = None
    unreachable: bool = False


def _hosts(args: argparse.Namespace, fleet: peers.Fleet, timeout: float) -> list[Host]:
    socket_path = find_socket(args.socket, args.config)
    hosts = [Host("local", str(socket_path), "local", lambda: Client(socket_path, timeout))]
    found = list(fleet.peers)
    found += [p for p in peers.tailscale_peers(fleet) if p.name not in {f.name for f in found}]
    fallback = Path(args.token_file).expanduser() if args.token_file else fleet.token_file
    if args.discover or fleet.discover:
        urls = {f.url for f in found}
        found += [p for p in _discover(args, fleet, fallback) if p.url not in urls]
    for peer in found:
        if peer.token_file is None and fallback is not None:
            peer = dataclasses.replace(peer, token_file=fallback)
        connect = None if peer.error else _connector(peer, timeout)
        hosts.append(Host(peer.name, peer.url, peer.source, connect, error=peer.error))
    return hosts


def _connector(peer: peers.Peer, timeout: float) -> Callable[[], Client]:
    return lambda: peer.client(timeout)


def _discover(
    args: argparse.Namespace, fleet: peers.Fleet, token_file: Path | None
) -> list[peers.Peer]:
    try:
        from llamad.fleet.discovery import browse  # zeroconf: paid for by --discover only

        found = browse(DISCOVER_S, args.mdns_interface or fleet.mdns_interface)
    except ModuleNotFoundError as exc:
        if exc.name not in ("zeroconf", "ifaddr"):
            raise
        print("llamactl: --discover needs zeroconf (pip install zeroconf)", file=sys.stderr)
        return []
    except Exception as exc:  # mDNS is best effort: the configured hosts still get asked
        print(f"llamactl: mDNS browse failed: {exc or type(exc).__name__}", file=sys.stderr)
        return []
    ca_file = Path(args.ca_file).expanduser() if args.ca_file else None
    return [peers.Peer(f.name, f.url, token_file, ca_file, "mdns") for f in found]


def query(hosts: list[Host], timeout: float) -> None:
    """Fill in each host's status or error, all at once, within timeout + SLACK_S."""
    done = threading.Condition()
    answers: dict[int, tuple[dict[str, Any] | None, str | None, bool]] = {}

    def ask(index: int, connect: Callable[[], Client]) -> None:
        try:
            answer: tuple[dict[str, Any] | None, str | None, bool] = (
                connect().call("GET", "/v1/status", timeout=timeout),
                None,
                False,
            )
        except Unreachable as exc:
            answer = (None, str(exc), True)
        except ClientError as exc:
            answer = (None, str(exc), False)
        with done:  # a thread that answers after the deadline writes where no one reads
            answers[index] = answer
            done.notify()

    for index, host in enumerate(hosts):
        if host.connect is not None:
            args = (index, host.connect)
            threading.Thread(target=ask, args=args, daemon=True, name=host.name).start()
    asked = sum(h.connect is not None for h in hosts)
    with done:
        done.wait_for(lambda: len(answers) == asked, timeout=timeout + SLACK_S)
        final, answers = dict(answers), {}
    for index, host in enumerate(hosts):
        if host.connect is None:
            host.unreachable = True  # known unreachable without asking (offline)
        elif index in final:
            host.status, host.error, host.unreachable = final[index]
        else:
            host.error = f"cannot reach llamad at {host.where} (no answer within {timeout:g}s)"
            host.unreachable = True


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
            state = "unreachable" if host.unreachable else "error"
            rows.append([host.name, "-", state] + ["-"] * (len(table.COLUMNS) - 2))
            notes.append(f"{host.name}: {host.error}")
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
    return "\n".join(table.grid(rows, 2, colour) + notes)


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
    hosts = _hosts(args, fleet, timeout)
    query(hosts, timeout)
    seen: set[tuple[Any, ...] | None] = set()
    hosts = [h for h in hosts if _keep(h, seen)]
    skews = skew(hosts)
    if args.json:
        import json

        docs = [
            {"host": h.name, "url": h.where, "source": h.source, "reachable": h.status is not None}
            | {"error": h.error, "status": h.status}
            for h in hosts
        ]
        served = replicas([(h.name, h.status) for h in hosts if h.status is not None])
        out(json.dumps({"hosts": docs, "skew": skews, "replicas": served}, indent=2))
    else:
        out(render(hosts, skews, table.use_colour(sys.stdout)))
    statuses = [h.status for h in hosts if h.status is not None]
    if len(statuses) < len(hosts):
        return exits.UNKNOWN
    running = (i.get("state") == "running" for s in statuses for i in s.get("instances") or [])
    return exits.OK if all(running) else exits.NOT_RUNNING
