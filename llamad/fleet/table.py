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
    source: str = "config"  # config, tailscale, mdns or url
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
    return fleet, problems


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
