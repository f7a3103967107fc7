"""Which llamads make up the fleet, as llamactl sees it: `[fleet]` in the config file,
Tailscale peers carrying a tag, and (in `fleet.py`) what mDNS finds.

Standard library only (tomllib, json, subprocess): this is on llamactl's path, where
pydantic would cost more than the whole command. The table is parsed by `table.py`,
which the daemon uses too, as its gateway does `tailnet` (gateway/fleet/hosts.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from llamad.client.http import BadConfig
from llamad.common import paths
from llamad.fleet.table import Fleet, Peer, parse_fleet

__all__ = [
    "Fleet",
    "Peer",
    "TailscaleError",
    "find_peer",
    "identity",
    "load_fleet",
    "tailnet",
    "tailscale_peers",
]

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TAILSCALE_TIMEOUT_S = 3.0


def load_fleet(config_arg: str | None) -> Fleet:
    """`[fleet]` from --config FILE, else the default config; empty when there is none.

    BadConfig (llamactl exits 2) names the file and the first problem.
    """
    config = Path(config_arg).expanduser() if config_arg else paths.default_config()
    if not config_arg and not config.is_file():
        return Fleet()
    try:
        table = tomllib.loads(config.read_text(encoding="utf-8")).get("fleet", {})
    except (OSError, ValueError) as exc:
        raise BadConfig(f"cannot read {config}: {exc}") from None
    fleet, problems = parse_fleet(table, config.absolute().parent)
    if problems:
        raise BadConfig(f"{config}: {problems[0].dotted}: {problems[0].message}")
    return fleet


class TailscaleError(Exception):
    """`tailscale status --json` could not be read; `missing` when there is no command."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def tailscale_peers(fleet: Fleet) -> list[Peer]:
    """Tailnet peers tagged `fleet.tailscale_tag`, as `http://FIRST-TAILSCALE-IP:PORT`.

    Nothing (and no message) without a tag or without the `tailscale` command; a
    tailscale that fails says so on stderr and contributes nothing.
    """
    try:
        return tailnet(fleet)
    except TailscaleError as exc:
        if not exc.missing:
            print(f"llamactl: tailscale status failed: {exc}", file=sys.stderr)
        return []


def tailnet(fleet: Fleet) -> list[Peer]:
    """Tailnet peers tagged `fleet.tailscale_tag` (none without a tag), sorted by name.
    Blocks for up to TAILSCALE_TIMEOUT_S; raises TailscaleError."""
    if not fleet.tailscale_tag:
        return []
    exe = shutil.which("tailscale")
    if exe is None:
        raise TailscaleError("the tailscale command is not on PATH", missing=True)
    try:
        out = subprocess.run(
            [exe, "status", "--json"],
            capture_output=True,
            check=True,
            timeout=TAILSCALE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        ).stdout
        status = json.loads(out)
        nodes = list((status.get("Peer") or {}).values())
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or b"").decode(errors="replace").strip().splitlines() or ["-"]
        raise TailscaleError(f"exit {exc.returncode}: {said[-1]}") from None
    except (OSError, ValueError, AttributeError, subprocess.SubprocessError) as exc:
        raise TailscaleError(str(exc) or type(exc).__name__) from None
    found = []
    for node in nodes:
        if not isinstance(node, dict) or fleet.tailscale_tag not in (node.get("Tags") or []):
            continue
        peer = _tailscale_peer(node, fleet)
        if peer is not None:
            found.append(peer)
    return sorted(found, key=lambda p: p.name)


def identity(status: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """Which daemon a status document comes from: (pid, started_at, config_path), the
    same however it was reached (configured URL, tailnet address, mDNS)."""
    daemon = (status or {}).get("daemon")
    if not isinstance(daemon, dict):
        return None
    return (daemon.get("pid"), daemon.get("started_at"), daemon.get("config_path"))


def _tailscale_peer(node: dict[str, Any], fleet: Fleet) -> Peer | None:
    ips = node.get("TailscaleIPs") or []
    dns = str(node.get("DNSName") or "").rstrip(".")
    address = ips[0] if ips else dns
    if not address:
        return None
    host = f"[{address}]" if ":" in address else address
    name = str(node.get("HostName") or dns.split(".")[0] or address)
    error = None if node.get("Online", True) else "offline in Tailscale"
    url = f"http://{host}:{fleet.tailscale_port}"
    return Peer(name, url, None, None, "tailscale", error)


def find_peer(name: str, fleet: Fleet) -> Peer:
    """The peer `--host NAME` means: a URL, a configured peer, else a tagged tailnet peer."""
    if "://" in name:
        return Peer(name, name, None, None, "url")
    for peer in fleet.peers:
        if peer.name == name:
            return peer
    for peer in tailscale_peers(fleet):
        if peer.name == name:
            return peer
    known = ", ".join(p.name for p in fleet.peers) or "none configured"
    raise BadConfig(f"no peer named {name!r} in [fleet] (peers: {known})")
