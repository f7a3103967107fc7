"""Load a config file: structure (schema.py), then the daemon's paths, then each kind's
executable and every instance resolved by its backend (resolve.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from llamad.backends.base import Backend
from llamad.backends.llama_server import KIND as LLAMA_SERVER
from llamad.backends.prompt import PromptDefaults
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import Tool
from llamad.common import paths
from llamad.common.hosts import same_address
from llamad.common.unixsock import MAX_SOCKET_PATH
from llamad.config.fleet_tables import split_listen
from llamad.config.gateway_access import bypassed_keys
from llamad.config.gateway_table import GatewayConfig, resolve_gateway
from llamad.config.model_names import replica_warnings
from llamad.config.prompt_cache import cache_max, cache_root
from llamad.config.readfile import read_partial
from llamad.config.remote import Remote, resolve_remote  # fleet: [daemon.remote]
from llamad.config.resolve import Resolver
from llamad.config.schema import ConfigError, ConfigFile, settings_of
from llamad.config.tomlpos import where_is
from llamad.fleet.table import Fleet, Peer
from llamad.library.listing import Library

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
    cache_dir: Path = Path()  # the prompt cache's root (one directory per instance)
    cache_max: int | None = None  # bytes; None: min(10 GiB, 10% of free space)
    cache_save_tokens: int = 512  # background saves of changed slots holding this many; 0: none
    cache_save_interval: float = 2.0  # at most one background save per instance this often
    keep_awake: bool = True  # no idle sleep while the gateway has requests (caffeinate)


@dataclass(frozen=True)
class Resolved:
    """A config file that passed every check, ready to run."""

    path: Path
    daemon: Daemon
    instances: dict[str, InstanceSpec]
    tools: dict[str, Tool] = field(default_factory=dict)  # kind -> executable, kinds in use
    peers: dict[str, Peer] = field(default_factory=dict)  # [fleet] peers, for rpc
    gateway: GatewayConfig | None = None  # [gateway], when it has `listen`
    fleet: Fleet = field(
        default_factory=Fleet
    )  # [fleet] itself: defaults, Tailscale and mDNS for the gateway
    library: Library | None = None  # [library], when it is on: what its scan found
    warnings: tuple[str, ...] = ()  # `file:line: key: message`, valid but unwise

    @property
    def llama_server(self) -> Tool | None:
        """The llama-server in use, if any instance runs one (the status document's
        `llama_server` and `llama_server_version`)."""
        return self.tools.get(LLAMA_SERVER)

    @property
    def llama_server_version(self) -> str:
        """llama-server's `--version` line, or "" when no instance runs llama-server."""
        tool = self.llama_server
        return tool.version if tool else ""


def load(path: Path, previous: Resolved | None = None) -> Resolved:
    """Read, validate and resolve `path`; raises ConfigError with one line per problem.
    `previous` (a reload's) keeps each library model on the port it had."""
    path = path.expanduser().absolute()
    cfg, text, problems = read_partial(path)
    return resolve(cfg, path, text, problems, previous.library if previous else None)


def check(path: Path, warnings: list[str] | None = None) -> list[str]:
    """The problems `llamad` would refuse to start with; empty when the file is valid.
    A valid file's warnings are added to `warnings`."""
    try:
        resolved = load(path)
    except ConfigError as exc:
        return exc.lines
    if warnings is not None:
        warnings.extend(resolved.warnings)
    return []


def _abs(value: str | None, base: Path, default: Path) -> Path:
    return paths.anchored(value, base) if value else default


def _locate(backend: Backend, configured: str | None) -> Tool:
    """The executable `configured` names (or the backend's default) and what it is."""
    cache = paths.cache_home()
    return backend.inspect(backend.find(configured, cache), cache)


def resolve(
    cfg: ConfigFile,
    path: Path,
    text: str,
    structural: list[str] | None = None,
    previous: Library | None = None,
) -> Resolved:
    """Turn the parsed file into specs, collecting every problem before failing.

    `structural` holds the problems already found in the file's structure; they are
    reported with the rest.
    """
    problems: list[str] = list(structural or ())
    d = cfg.daemon
    base = path.parent  # relative paths are the config file's, not the cwd's
    state_dir = _abs(d.state_dir, base, paths.state_home())
    daemon = Daemon(
        state_dir=state_dir,
        socket=_abs(d.socket, base, state_dir / "llamad.sock"),
        log_dir=_abs(d.log_dir, base, state_dir / "logs"),
        log_max_bytes=d.log_max_bytes,
        log_backups=d.log_backups,
        log_level=d.log_level,
        reexport_metrics=d.reexport_metrics,
        remote=resolve_remote(d.remote, path, text, problems),  # fleet
        cache_dir=cache_root(cfg, base),
        cache_save_tokens=d.cache_save_tokens,
        cache_save_interval=d.cache_save_interval,
        keep_awake=d.keep_awake,
    )
    try:
        daemon = replace(daemon, cache_max=cache_max(d.cache_max))
    except ValueError as exc:
        problems.append(f"{where_is(path, text, ('daemon', 'cache_max'))}: daemon.cache_max: {exc}")
    if len(os.fsencode(daemon.socket)) > MAX_SOCKET_PATH:
        problems.append(
            f"{where_is(path, text, ('daemon', 'socket'))}: daemon.socket: path is longer than "
            f"{MAX_SOCKET_PATH} bytes, the AF_UNIX limit: {daemon.socket}"
        )
    lib_settings = settings_of(cfg)
    scanned = None
    if lib_settings:
        # The library's scanners load only with a library: a config of instances alone
        # starts without them.
        from llamad.config.library_specs import find as find_library

        scanned = find_library(lib_settings, base)
    linked: dict[str, str] = {}
    stores: dict[str, PromptDefaults] = {}
    if scanned is not None:
        from llamad.config.library_links import link_configured

        links = link_configured(cfg, scanned[1], base)
        cfg, linked, stores = links.cfg, links.linked, links.prompts
    resolver = Resolver(cfg, path, text, stores, locate=_locate)
    # The library serves with llama-server. Until it has found a model, one that cannot be
    # found is no error (a config of MLX instances alone): the library is then off.
    library_tool = frozenset([LLAMA_SERVER]) if scanned else frozenset()
    maybe = library_tool if scanned and not scanned[1].models else frozenset()
    tools = resolver.tools(library_tool, optional=maybe)
    instances = resolver.all(tools)
    library = None
    if lib_settings and scanned and LLAMA_SERVER in tools:
        from llamad.config.library_specs import check_defaults, library_specs

        check_defaults(
            tools[LLAMA_SERVER].details,
            lib_settings.defaults,
            resolver.problem_at("library", "defaults"),
        )
        taken = {s.port for s in instances.values()} | _listener_ports(cfg, daemon)
        more, library = library_specs(
            cfg, path, text, tools, instances, taken, lib_settings, scanned, linked, previous
        )
        instances = {**instances, **more}
    if daemon.remote is not None:
        host = daemon.remote.host
        listen = f"[{host}]:{daemon.remote.port}" if ":" in host else f"{host}:{daemon.remote.port}"
        resolver.listener_clashes(instances, "daemon.remote.listen", listen)
    gateway = resolve_gateway(cfg.gateway, instances, resolver.problem_at(), base)
    remote = daemon.remote
    if (
        gateway
        and remote
        and gateway.port == remote.port
        and same_address(gateway.host, remote.host)
    ):
        resolver.problem_at("gateway")(
            ("listen",), f"port {gateway.port} is already used by daemon.remote.listen"
        )
    problems.extend(resolver.problems)
    if problems:
        raise ConfigError(problems)
    warnings: list[str] = []
    notes = list(replica_warnings(instances)) if gateway is not None else []
    if gateway is not None and not gateway.api_keys:
        notes += bypassed_keys(instances)
    for keys, message in notes:
        warnings.append(f"{where_is(path, text, keys)}: {'.'.join(keys)}: {message}")
    return Resolved(
        path, daemon, instances, tools, _peers(cfg), gateway, cfg.fleet, library, tuple(warnings)
    )


def _listener_ports(cfg: ConfigFile, daemon: Daemon) -> set[int]:
    """llamad's own ports, which no library model may take."""
    ports = {daemon.remote.port} if daemon.remote else set()
    if cfg.gateway.listen:
        ports.add(split_listen(cfg.gateway.listen)[1])
    return ports


def _peers(cfg: ConfigFile) -> dict[str, Peer]:
    """`[fleet] peers` as heads and the gateway reach them; tokens are read when asked,
    and, as with llamactl, a peer without a token_file uses `[fleet] token_file` (and
    likewise `gateway_key_file`)."""
    return {p.name: cfg.fleet.with_defaults(p) for p in cfg.fleet.peers}
