"""Load a config file: structure (config.py), then the daemon's paths and binaries, then
every instance resolved against what the installed llama-server accepts (launchspec.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from llamad.backends import rpc
from llamad.backends.binaries import find_binary, find_rpc_server
from llamad.backends.catalog import CatalogError
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.spec import InstanceSpec
from llamad.common import paths
from llamad.common.unixsock import MAX_SOCKET_PATH
from llamad.config.readfile import read_partial
from llamad.config.remote import Remote, resolve_remote  # fleet: [daemon.remote]
from llamad.config.resolve import Resolver
from llamad.config.schema import ConfigError, ConfigFile, where_is
from llamad.fleet.remote_workers import RemotePeer

__all__ = ["ConfigError", "Daemon", "InstanceSpec", "Resolved", "check", "load", "resolve"]


@dataclass(frozen=True)
class Daemon:
    """`[daemon]` with every path made absolute and every default filled in."""

    state_dir: Path
    socket: Path
    log_dir: Path
    log_max_bytes: int
    log_backups: int
    log_level: str
    reexport_metrics: bool = False
    remote: Remote | None = None  # fleet: the control API on TCP, when configured


@dataclass(frozen=True)
class Resolved:
    """A config file that passed every check, ready to run."""

    path: Path
    binary: Path
    llama_server_version: str
    daemon: Daemon
    instances: dict[str, InstanceSpec]
    rpc_binary: Path | None = None
    peers: dict[str, RemotePeer] = field(default_factory=dict)  # [fleet] peers, for rpc


def load(path: Path) -> Resolved:
    """Read, validate and resolve `path`; raises ConfigError with one line per problem."""
    path = path.expanduser().absolute()
    cfg, text, problems = read_partial(path)
    return resolve(cfg, path, text, problems)


def check(path: Path) -> list[str]:
    """The problems `llamad` would refuse to start with; empty when the file is valid."""
    try:
        load(path)
    except ConfigError as exc:
        return exc.lines
    return []


def _abs(value: str | None, default: Path) -> Path:
    return Path(value).expanduser().absolute() if value else default


def _maybe(value: str | None) -> Path | None:
    return Path(value).expanduser().absolute() if value else None


def resolve(
    cfg: ConfigFile, path: Path, text: str, structural: list[str] | None = None
) -> Resolved:
    """Turn the parsed file into specs, collecting every problem before failing.

    `structural` holds the problems already found in the file's structure; they are
    reported with the rest.
    """
    problems: list[str] = list(structural or ())
    d = cfg.daemon
    state_dir = _abs(d.state_dir, paths.state_home())
    daemon = Daemon(
        state_dir=state_dir,
        socket=_abs(d.socket, state_dir / "llamad.sock"),
        log_dir=_abs(d.log_dir, state_dir / "logs"),
        log_max_bytes=d.log_max_bytes,
        log_backups=d.log_backups,
        log_level=d.log_level,
        reexport_metrics=d.reexport_metrics,
        remote=resolve_remote(d.remote, path, text, problems),  # fleet
    )
    if len(os.fsencode(daemon.socket)) > MAX_SOCKET_PATH:
        problems.append(
            f"{where_is(path, text, ('daemon', 'socket'))}: daemon.socket: path is longer than "
            f"{MAX_SOCKET_PATH} bytes, the AF_UNIX limit: {daemon.socket}"
        )
    try:
        binary = find_binary(d.llama_server)
        catalog = load_catalog(binary, paths.cache_home())
    except CatalogError as exc:
        where = where_is(path, text, ("daemon", "llama_server"))
        raise ConfigError([*problems, f"{where}: {exc}"]) from None

    rpc_binary, rpc_help = None, ""
    if any(t.kind == rpc.KIND for t in cfg.instances.values()):
        try:
            rpc_binary = find_rpc_server(d.rpc_server)
            rpc_help = rpc.rpc_help(rpc_binary)
        except CatalogError as exc:
            problems.append(f"{where_is(path, text, ('daemon', 'rpc_server'))}: {exc}")
    resolver = Resolver(cfg, path, text, catalog, rpc_help)
    instances = resolver.all()
    if daemon.remote is not None:
        listen = f"[{daemon.remote.host}]" if ":" in daemon.remote.host else daemon.remote.host
        resolver.listener_clashes(
            instances, "daemon.remote.listen", f"{listen}:{daemon.remote.port}"
        )
    problems.extend(resolver.problems)
    if problems:
        raise ConfigError(problems)
    return Resolved(path, binary, catalog.version, daemon, instances, rpc_binary, _peers(cfg))


def _peers(cfg: ConfigFile) -> dict[str, RemotePeer]:
    """`[fleet] peers` as heads reach their remote workers; the token is read when asked,
    and, as with llamactl, a peer without a token_file uses `[fleet] token_file`."""
    default = cfg.fleet.token_file
    return {
        p.name: RemotePeer(p.name, p.url, _maybe(p.token_file or default), _maybe(p.ca_file))
        for p in cfg.fleet.peers
    }
