"""What works in Terminal and fails under launchd on a Mac, found in the config at install.

- **Protected folders.** Files under `~/Documents`, `~/Downloads`, `~/Desktop`, iCloud
  Drive (`~/Library/Mobile Documents`) or on `/Volumes` need a privacy grant that
  Terminal has and a launchd job does not: reads fail with "Operation not permitted".
- **Local Network privacy** (macOS 15+). A LaunchAgent's traffic to the LAN (fleet peers,
  RPC workers on other hosts, mDNS, a listener beyond loopback) is blocked without a
  prompt ("No route to host"); LaunchDaemons are exempt (Apple TN3179), so `--system`
  (a daemon that runs as the user) is the fix.

The config is read as plain TOML, as `stop_budget` reads it: a warning must never fail
on a config the daemon would reject.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

PROTECTED = ("Documents", "Downloads", "Desktop", "Library/Mobile Documents")


def protected_folder(path: Path, home: Path) -> str | None:
    """The protected folder `path` lies in, as the user would name it, or None."""
    for name in PROTECTED:
        if path.is_relative_to(home / name):
            return f"~/{name}"
    return "/Volumes" if path.is_relative_to("/Volumes") else None


def read_config(config: Path) -> dict[str, Any]:
    """The config as plain TOML; {} when it cannot be read."""
    try:
        with config.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def used_paths(data: dict[str, Any], config: Path, llamad: Path) -> list[tuple[str, Path]]:
    """(what, path) for every file or folder the daemon will read or write."""
    base = config.parent
    found = [("the config", config), ("llamad's install", llamad.parent)]
    daemon = _table(data, "daemon")
    for key in ("state_dir", "log_dir", "cache_dir", "llama_server"):
        if isinstance(daemon.get(key), str) and "/" in daemon[key]:
            found.append((f"[daemon] {key}", _path(daemon[key], base)))
    for name, spec in _table(data, "instances").items():
        model = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(model, str) and "/" in model:
            found.append((f"instance {name}'s model", _path(model, base)))
    library = _table(data, "library")
    dirs = library.get("dirs")
    for folder in dirs if isinstance(dirs, list) else []:
        if isinstance(folder, str):
            found.append(("a [library] folder", _path(folder, base)))
    if isinstance(library.get("pull_dir"), str):
        found.append(("[library] pull_dir", _path(library["pull_dir"], base)))
    return found


def protected_warnings(data: dict[str, Any], config: Path, llamad: Path, home: Path) -> list[str]:
    """One warning per path under a folder a launchd job may not read."""
    warnings = []
    for what, path in used_paths(data, config, llamad):
        if (folder := protected_folder(path, home)) is not None:
            warnings.append(
                f"{what} is under {folder} ({path}): under launchd macOS refuses it "
                "(Operation not permitted) though Terminal may read it; move it elsewhere"
            )
    return warnings


def lan_uses(data: dict[str, Any]) -> list[str]:
    """What in the config talks to the local network, as a user would name it."""
    uses = []
    fleet = _table(data, "fleet")
    peers = fleet.get("peers")
    urls = [p.get("url") for p in peers if isinstance(p, dict)] if isinstance(peers, list) else []
    if any(isinstance(u, str) and not _loopback(urlsplit(u).hostname) for u in urls):
        uses.append("fleet peers")
    if fleet.get("discover") is True:
        uses.append("mDNS discovery")
    remote = _table(_table(data, "daemon"), "remote")
    for what, table in (("[daemon.remote]", remote), ("[gateway]", _table(data, "gateway"))):
        listen = table.get("listen")
        if isinstance(listen, str) and not _loopback(listen.rpartition(":")[0].strip("[]")):
            uses.append(f"{what} listening beyond loopback")
    for name, spec in _table(data, "instances").items():
        rpc = spec.get("rpc") if isinstance(spec, dict) else None
        workers = rpc if isinstance(rpc, list) else []
        if any(isinstance(w, str) and _remote_worker(w) for w in workers):
            uses.append(f"instance {name}'s RPC workers")
        host = spec.get("host") if isinstance(spec, dict) else None
        if isinstance(host, str) and not _loopback(host):
            uses.append(f"instance {name} listening beyond loopback")
    return list(dict.fromkeys(uses))


def local_network_warning(data: dict[str, Any]) -> str | None:
    """The warning for a LaunchAgent whose config talks to the LAN, or None."""
    uses = lan_uses(data)
    if not uses:
        return None
    return (
        f"this config uses the local network ({', '.join(uses)}): macOS 15 and later block "
        "a LaunchAgent's LAN traffic without asking (Local Network privacy); install with "
        "--system instead (a LaunchDaemon that runs as you, which is exempt)"
    )


def _remote_worker(worker: str) -> bool:
    if "/" in worker:  # peer/worker: on a fleet peer
        return True
    host, sep, _ = worker.rpartition(":")
    return bool(sep) and not _loopback(host.strip("[]"))


def _loopback(host: str | None) -> bool:
    if not host or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: resolved on the network


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _path(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))
