"""`[fleet]`: the one parser of the table, and the records it yields.

Standard library only: llamactl reads `[fleet]` on its way to `fleet status` and `--host`,
where pydantic would cost more than the whole command. The daemon reads the same table
with the same function (`config.schema`), so both accept and refuse the same files; each
only words the problems its own way (llamactl: the first, exit 2; llamad: every one, at
its file:line).
"""

from __future__ import annotations

import difflib
import ipaddress
from dataclasses import dataclass, replace
from pathlib import Path

from llamad.client.http import BadConfig, Client
from llamad.common.paths import anchored
from llamad.common.redact import shown
from llamad.common.tokenfile import TokenFileError, read_token

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_TAILSCALE_PORT = 7777
FLEET_KEYS = (
    "peers",
    "token_file",
    "gateway_key_file",
    "timeout",
    "tailscale_tag",
    "tailscale_port",
    "discover",
    "mdns_interface",
    "dns_name",
    "dns_port",
    "dns_server",
    "dns_interval",
)
PEER_KEYS = ("name", "url", "token_file", "ca_file", "gateway_key_file")
LOCAL = "local"  # the daemon on this machine, in a head's `rpc = ["local/..."]` sense

Keys = tuple[str | int, ...]


@dataclass(frozen=True)
class Peer:
    """One remote llamad: its name in the fleet, its URL and how to authenticate."""

    name: str
    url: str
    token_file: Path | None = None  # its own; callers fall back to [fleet] or --token-file
    ca_file: Path | None = None
    source: str = "config"  # config, tailscale, dns, mdns or url
    error: str | None = None  # known unreachable without trying (offline in Tailscale)
    gateway_key_file: Path | None = None  # the key its gateway wants (`[gateway] fleet`)

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
    """`[fleet]`, checked, with paths made absolute (relative to the config file's directory)."""

    peers: tuple[Peer, ...] = ()
    token_file: Path | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    tailscale_tag: str | None = None
    tailscale_port: int = DEFAULT_TAILSCALE_PORT
    gateway_key_file: Path | None = None  # for peers without their own (`[gateway] fleet`)
    discover: bool = False  # browse mDNS: `fleet status` as with --discover, and the gateway
    mdns_interface: str | None = None  # browse on this address only; None: every interface
    # A headless Service's name (A/AAAA records, their peers at dns_port) or an SRV name
    # (`_control._tcp.NAME`, the port in each record), asked again every dns_interval
    # seconds (None: as long as the records' TTL) of dns_server (None: the system's).
    dns_name: str | None = None
    dns_port: int = DEFAULT_TAILSCALE_PORT
    dns_server: str | None = None
    dns_interval: float | None = None

    def with_defaults(self, peer: Peer) -> Peer:
        """`peer` with this table's token_file and gateway_key_file where it has none."""
        return replace(
            peer,
            token_file=peer.token_file or self.token_file,
            gateway_key_file=peer.gateway_key_file or self.gateway_key_file,
        )


@dataclass(frozen=True)
class Problem:
    """What is wrong, and where under `[fleet]`: e.g. (("peers", 0, "url"), "must ...")."""

    keys: Keys
    message: str

    @property
    def dotted(self) -> str:
        """`fleet.peers[0].url`, as messages name the key."""
        text = "fleet"
        for key in self.keys:
            text += f"[{key}]" if isinstance(key, int) else f".{key}"
        return text


def parse_fleet(table: object, base: Path) -> tuple[Fleet, list[Problem]]:
    """`[fleet]` as read by tomllib -> (Fleet, problems); the Fleet is usable only when
    there are no problems. Relative paths are taken from `base`, the file's directory."""
    problems: list[Problem] = []

    def problem(keys: Keys, message: str) -> None:
        problems.append(Problem(keys, message))

    if not isinstance(table, dict):
        problem((), "must be a table")
        return Fleet(), problems
    _unknown(table, FLEET_KEYS, (), problem)
    peers = _peers(table.get("peers", []), problem, base)
    timeout = table.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problem(("timeout",), f"must be a positive number of seconds (got {timeout!r})")
        timeout = DEFAULT_TIMEOUT_S
    tag = table.get("tailscale_tag")
    if tag is not None and not isinstance(tag, str):
        problem(("tailscale_tag",), f"must be a string like 'tag:llamad' (got {tag!r})")
        tag = None
    port = table.get("tailscale_port", DEFAULT_TAILSCALE_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        problem(("tailscale_port",), f"must be a port from 1 to 65535 (got {port!r})")
        port = DEFAULT_TAILSCALE_PORT
    token = _path(table.get("token_file"), ("token_file",), problem, base)
    gw_key = _path(table.get("gateway_key_file"), ("gateway_key_file",), problem, base)
    discover = table.get("discover", False)
    if not isinstance(discover, bool):
        problem(("discover",), f"must be true or false (got {discover!r})")
        discover = False
    interface = table.get("mdns_interface")
    if interface is not None and not _is_address(interface):
        problem(("mdns_interface",), f"must be an IP address like '127.0.0.1' (got {interface!r})")
        interface = None
    fleet = Fleet(tuple(peers), token, float(timeout), tag, port, gw_key, discover, interface)
    return replace(fleet, **_dns(table, problem)), problems


def _dns(table: dict[str, Any], problem: Any) -> dict[str, Any]:
    """The `dns_*` keys that are well formed; each bad one is a problem and left out."""
    out: dict[str, Any] = {}
    name = table.get("dns_name")
    if name is not None:
        if isinstance(name, str) and 0 < len(name.rstrip(".")) <= 253 and " " not in name:
            out["dns_name"] = name
        else:
            problem(("dns_name",), f"must be a DNS name like 'llamad.llm.svc' (got {name!r})")
    port = table.get("dns_port")
    if port is not None:
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            out["dns_port"] = port
        else:
            problem(("dns_port",), f"must be a port from 1 to 65535 (got {port!r})")
    server = table.get("dns_server")
    if server is not None:
        if nameserver(server) is not None:
            out["dns_server"] = server
        else:
            problem(("dns_server",), f"must be IP or IP:PORT like '10.43.0.10:53' (got {server!r})")
    every = table.get("dns_interval")
    if every is not None:
        if isinstance(every, int | float) and not isinstance(every, bool) and every > 0:
            out["dns_interval"] = float(every)
        else:
            problem(("dns_interval",), f"must be a positive number of seconds (got {every!r})")
    return out


def nameserver(text: object) -> tuple[str, int] | None:
    """`IP`, `IP:PORT` or `[IPv6]:PORT` -> (ip, port), port 53 by default; None if malformed."""
    if not isinstance(text, str):
        return None
    host, port = text, "53"
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("53" if bracket and not rest else "-")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if not _is_address(host) or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def _is_address(value: object) -> bool:
    try:
        ipaddress.ip_address(value if isinstance(value, str) else "-")
    except ValueError:
        return False
    return True


def _peers(entries: object, problem: Any, base: Path) -> list[Peer]:
    if not isinstance(entries, list):
        problem(("peers",), "must be a list of tables ([[fleet.peers]])")
        return []
    peers: list[Peer] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problem(("peers", i), "must be a table with a name and a url")
            continue
        _unknown(entry, PEER_KEYS, ("peers", i), problem)
        name, url = entry.get("name"), entry.get("url")
        if not isinstance(name, str) or not name:
            problem(("peers", i, "name"), "is required: a non-empty string")
            continue
        if name == LOCAL:
            problem(("peers", i, "name"), f"{LOCAL!r} is taken by the daemon on this machine")
        elif any(p.name == name for p in peers):
            problem(("peers", i, "name"), f"peer names must be unique: {name!r} is used twice")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            problem(("peers", i, "url"), f"must start with http:// or https:// (got {url!r})")
            continue
        token = _path(entry.get("token_file"), ("peers", i, "token_file"), problem, base)
        ca_file = _path(entry.get("ca_file"), ("peers", i, "ca_file"), problem, base)
        gw_key = _path(
            entry.get("gateway_key_file"), ("peers", i, "gateway_key_file"), problem, base
        )
        peers.append(Peer(name, url, token, ca_file, gateway_key_file=gw_key))
    return peers


def _unknown(table: dict[str, Any], known: tuple[str, ...], at: Keys, problem: Any) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problem((*at, key), f"unknown key {key!r}{hint}")


def _path(value: object, keys: Keys, problem: Any, base: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        # A token pasted where its file path belongs must not be echoed back.
        problem(keys, f"must be a file path (got {shown(keys, value)})")
        return None
    return anchored(value, base)
