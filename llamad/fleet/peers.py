"""Which llamads make up the fleet, as llamactl sees it: `[fleet]` in the config file,
Tailscale peers carrying a tag, and (in `fleet.py`) what mDNS finds.

Standard library only (tomllib, json, subprocess): this is on llamactl's path, where
pydantic would cost more than the whole command. The daemon validates the same table
with pydantic (`remote_settings.py`); here it is read leniently but checked enough to
say what is wrong, with exit 2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from llamad.client.http import BadConfig, Client
from llamad.common import paths
from llamad.common.tokenfile import TokenFileError, read_token

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TAILSCALE_TIMEOUT_S = 3.0
DEFAULT_FLEET_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Peer:
    """One remote llamad: its name in the fleet, its URL and how to authenticate."""

    name: str
    url: str
    token_file: Path | None = None  # its own; callers fall back to [fleet] or --token-file
    ca_file: Path | None = None
    source: str = "config"  # config, tailscale, mdns or url
    error: str | None = None  # known unreachable without trying (offline in Tailscale)

    def client(self, timeout: float) -> Client:
        """A Client for this peer; BadConfig when its token file is unusable."""
        token = None
        if self.token_file is not None:
            try:
                token = read_token(self.token_file)
            except TokenFileError as exc:
                raise BadConfig(f"{self.name}: token_file: {exc}") from None
        try:
            return Client(url=self.url, token=token, ca_file=self.ca_file, timeout=timeout)
        except ValueError as exc:
            raise BadConfig(f"{self.name}: {exc}") from None


@dataclass(frozen=True)
class Fleet:
    """`[fleet]` of the config file llamactl reads."""

    peers: tuple[Peer, ...] = ()
    token_file: Path | None = None
    timeout: float = DEFAULT_FLEET_TIMEOUT_S
    tailscale_tag: str | None = None
    tailscale_port: int = 7777


def _path(value: object, where: str, base: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadConfig(f"{where}: must be a file path")
    return paths.anchored(value, base)  # like the daemon: relative to the config file


def load_fleet(config_arg: str | None) -> Fleet:
    """`[fleet]` from --config FILE, else the default config; empty when there is none."""
    config = Path(config_arg).expanduser() if config_arg else paths.default_config()
    if not config_arg and not config.is_file():
        return Fleet()
    try:
        table = tomllib.loads(config.read_text(encoding="utf-8")).get("fleet", {})
    except (OSError, ValueError) as exc:
        raise BadConfig(f"cannot read {config}: {exc}") from None
    if not isinstance(table, dict):
        raise BadConfig(f"{config}: fleet: must be a table")
    default_token = _path(table.get("token_file"), f"{config}: fleet.token_file", config.parent)
    peers = []
    for i, entry in enumerate(table.get("peers") or []):
        where = f"{config}: fleet.peers[{i}]"
        name, url = (entry.get(k) if isinstance(entry, dict) else None for k in ("name", "url"))
        if not isinstance(name, str) or not name or not isinstance(url, str):
            raise BadConfig(f"{where}: needs a name and a url")
        if not url.startswith(("http://", "https://")):
            raise BadConfig(f"{where}.url: must start with http:// or https:// (got {url!r})")
        token = _path(entry.get("token_file"), f"{where}.token_file", config.parent)
        ca_file = _path(entry.get("ca_file"), f"{where}.ca_file", config.parent)
        peers.append(Peer(name, url, token, ca_file))
    timeout = table.get("timeout", DEFAULT_FLEET_TIMEOUT_S)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise BadConfig(f"{config}: fleet.timeout: must be a positive number of seconds")
    tag, port = table.get("tailscale_tag"), table.get("tailscale_port", 7777)
    if tag is not None and not isinstance(tag, str):
        raise BadConfig(f"{config}: fleet.tailscale_tag: must be a string like 'tag:llamad'")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise BadConfig(f"{config}: fleet.tailscale_port: must be a port from 1 to 65535")
    return Fleet(tuple(peers), default_token, float(timeout), tag, port)


def tailscale_peers(fleet: Fleet) -> list[Peer]:
    """Tailnet peers tagged `fleet.tailscale_tag`, as `http://FIRST-TAILSCALE-IP:PORT`.

    Nothing (and no message) without a tag or without the `tailscale` command; a
    tailscale that fails says so on stderr and contributes nothing.
    """
    exe = shutil.which("tailscale") if fleet.tailscale_tag else None
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "status", "--json"],
            capture_output=True,
            check=True,
            timeout=TAILSCALE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        ).stdout
        status = json.loads(out)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"llamactl: tailscale status failed: {exc}", file=sys.stderr)
        return []
    found = []
    for node in (status.get("Peer") or {}).values():
        if fleet.tailscale_tag not in (node.get("Tags") or []):
            continue
        peer = _tailscale_peer(node, fleet)
        if peer is not None:
            found.append(peer)
    return sorted(found, key=lambda p: p.name)


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
