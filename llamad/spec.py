"""Resolve a parsed config against the installed llama-server into launchable specs.

The resolved `InstanceSpec` is what reload compares: two specs with the same `launch`
tuple run the same process, so an unchanged instance is never touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError as PydanticError

from llamad import paths
from llamad.catalog import Catalog, CatalogError, find_binary, load_catalog, render
from llamad.config import (
    ConfigError,
    ConfigFile,
    InstanceTable,
    SuperviseSettings,
    Value,
    describe,
    read_file,
    where_is,
)
from llamad.states import Knobs

Problem = Callable[[tuple[str, ...], str], None]

# macOS allows 104 bytes in sun_path, Linux 108: keep to the smaller so a config travels.
MAX_SOCKET_PATH = 104
_MODEL_SOURCES = (
    "LLAMA_ARG_MODEL",
    "LLAMA_ARG_HF_REPO",
    "LLAMA_ARG_MODEL_URL",
    "LLAMA_ARG_DOCKER_REPO",
)
_WILDCARDS = {"0.0.0.0", "::", ""}
_SECRET_ENVS = {"LLAMA_API_KEY", "HF_TOKEN"}


@dataclass(frozen=True)
class InstanceSpec:
    """One llama-server instance, fully resolved: what to run and how to watch it."""

    name: str
    host: str
    port: int
    model: Path | None
    settings: tuple[tuple[str, str], ...]  # LLAMA_* environment, sorted
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # the user's extra environment, sorted
    autostart: bool = True
    watch_model: bool = True
    knobs: Knobs = field(default_factory=Knobs)
    secrets: tuple[str, ...] = ()

    @property
    def launch(self) -> tuple[object, ...]:
        """Everything that needs a new process when it changes."""
        return (self.host, self.port, self.model, self.settings, self.args, self.env)

    @property
    def probe_host(self) -> str:
        """Where to reach the server: a wildcard bind is reached on loopback."""
        first = self.host.split(",")[0].strip()
        if first in _WILDCARDS:
            return "::1" if first == "::" else "127.0.0.1"
        return first


@dataclass(frozen=True)
class Daemon:
    """`[daemon]` with every path made absolute and every default filled in."""

    state_dir: Path
    socket: Path
    log_dir: Path
    log_max_bytes: int
    log_backups: int
    log_level: str


@dataclass(frozen=True)
class Resolved:
    """A config file that passed every check, ready to run."""

    path: Path
    binary: Path
    llama_server_version: str
    daemon: Daemon
    instances: dict[str, InstanceSpec]


def load(path: Path) -> Resolved:
    """Read, validate and resolve `path`; raises ConfigError with one line per problem."""
    path = path.expanduser().absolute()
    cfg, text = read_file(path)
    return resolve(cfg, path, text)


def check(path: Path) -> list[str]:
    """The problems `llamad` would refuse to start with; empty when the file is valid."""
    try:
        load(path)
    except ConfigError as exc:
        return exc.lines
    return []


def _abs(value: str | None, default: Path) -> Path:
    return Path(value).expanduser().absolute() if value else default


def resolve(cfg: ConfigFile, path: Path, text: str) -> Resolved:
    """Turn the parsed file into specs, collecting every problem before failing."""
    problems: list[str] = []
    d = cfg.daemon
    state_dir = _abs(d.state_dir, paths.state_home())
    daemon = Daemon(
        state_dir=state_dir,
        socket=_abs(d.socket, state_dir / "llamad.sock"),
        log_dir=_abs(d.log_dir, state_dir / "logs"),
        log_max_bytes=d.log_max_bytes,
        log_backups=d.log_backups,
        log_level=d.log_level,
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

    def in_defaults(keys: tuple[str, ...], msg: str) -> None:
        where = where_is(path, text, ("defaults", *keys))
        problems.append(f"{where}: defaults.{'.'.join(keys)}: {msg}")

    rendered = _render(cfg.defaults, catalog, in_defaults)
    defaults = {k: v for k, v in rendered.items() if v is not None}
    instances: dict[str, InstanceSpec] = {}
    for name in cfg.instances:
        spec = _instance(cfg, name, defaults, catalog, path, text, problems)
        if spec is not None:
            instances[name] = spec
    problems.extend(_port_clashes(instances, path, text))
    if problems:
        raise ConfigError(problems)
    return Resolved(path, binary, catalog.version, daemon, instances)


def _render(values: dict[str, Value], catalog: Catalog, problem: Problem) -> dict[str, str | None]:
    """Map each key to its env name and render its value; unknown keys are problems."""
    out: dict[str, str | None] = {}
    for key, value in values.items():
        look = catalog.lookup(key)
        if look is None:
            hint = catalog.suggest(key, extra=InstanceTable.model_fields)
            tail = f" (did you mean {hint}?)" if hint else ""
            problem((key,), f"unknown key {key!r}{tail}")
            continue
        try:
            out[look.env] = render(look, value)
        except ValueError as exc:
            problem((key,), f"{exc} (got {value!r})")
    return out


def _instance(
    cfg: ConfigFile,
    name: str,
    defaults: dict[str, str],
    catalog: Catalog,
    path: Path,
    text: str,
    problems: list[str],
) -> InstanceSpec | None:
    table = cfg.instances[name]
    before = len(problems)

    def problem(keys: tuple[str, ...], msg: str) -> None:
        where = where_is(path, text, ("instances", name, *keys))
        problems.append(f"{where}: instances.{name}{''.join('.' + k for k in keys)}: {msg}")

    settings = dict(defaults)
    for key, rendered in _render(table.model_extra or {}, catalog, problem).items():
        # None means "leave unset": a false value-less flag, or an instance undoing a default.
        if rendered is None:
            settings.pop(key, None)
        else:
            settings[key] = rendered
    for env in _MODEL_SOURCES:
        if env in settings:
            break
    else:
        problem((), "model is required")
    model = Path(settings["LLAMA_ARG_MODEL"]) if "LLAMA_ARG_MODEL" in settings else None
    if model is not None and not model.is_file():
        problem(("model",), f"model file not found: {model}")
    key_file = settings.get("LLAMA_ARG_API_KEY_FILE")
    secrets = [settings[e] for e in _SECRET_ENVS if e in settings]
    if key_file:
        try:
            lines = Path(key_file).read_text(encoding="utf-8").splitlines()
            secrets += [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
        except OSError as exc:
            problem(("api_key_file",), f"cannot read key file {key_file}: {exc.strerror}")
    port_text = settings.get("LLAMA_ARG_PORT")
    port = int(port_text) if port_text and port_text.isdigit() else 0
    if not 0 < port < 65536:
        problem(
            ("port",),
            "is required: a TCP port from 1 to 65535"
            if not port_text
            else f"must be a TCP port from 1 to 65535 (got {port_text!r})",
        )
    host = settings.setdefault("LLAMA_ARG_HOST", "127.0.0.1")
    if host.endswith(".sock"):
        problem(("host",), "unix-socket hosts are not supported; use an address")
    _check_args(table.args, catalog, settings, problem)
    for key in table.env:
        if key.startswith("LLAMA_"):
            problem(("env", key), "set llama-server options as instance keys, not in env")
    knobs = _knobs(cfg, name, problem)
    if len(problems) > before or knobs is None:
        return None
    return InstanceSpec(
        name=name,
        host=host,
        port=port,
        model=model,
        settings=tuple(sorted(settings.items())),
        args=tuple(table.args),
        env=tuple(sorted((k, _env_str(v)) for k, v in table.env.items())),
        autostart=table.autostart,
        watch_model=table.watch_model,
        knobs=knobs,
        secrets=tuple(s for s in secrets if s),
    )


def _env_str(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _check_args(
    args: list[str], catalog: Catalog, settings: dict[str, str], problem: Problem
) -> None:
    for i, arg in enumerate(args):
        if not arg.startswith("-") or _is_number(arg):
            continue
        option = catalog.flag(arg.split("=", 1)[0])
        if option is None:
            problem(("args",), f"unknown llama-server flag {arg!r} (args[{i}])")
        elif option.env in ("LLAMA_ARG_HOST", "LLAMA_ARG_PORT"):
            problem(("args",), f"{arg} is set with the `host`/`port` keys, not in args")
        elif option.env in _SECRET_ENVS:
            problem(("args",), f"{arg} would show the key in `ps`; use api_key_file instead")
        elif option.env in settings:
            problem(("args",), f"{arg} is also set by a key ({option.env}); set it once")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _knobs(cfg: ConfigFile, name: str, problem: Problem) -> Knobs | None:
    merged = cfg.supervise.model_dump() | cfg.instances[name].supervise
    try:
        s = SuperviseSettings.model_validate(merged)
    except PydanticError as exc:
        for err in exc.errors(include_url=False):
            key = str(err["loc"][-1])
            problem(("supervise", key), describe(err))
        return None
    return Knobs(**s.model_dump())


def _port_clashes(specs: dict[str, InstanceSpec], path: Path, text: str) -> list[str]:
    lines = []
    seen: dict[int, list[InstanceSpec]] = {}
    for spec in specs.values():
        for other in seen.get(spec.port, []):
            if spec.host == other.host or {spec.host, other.host} & _WILDCARDS:
                where = where_is(path, text, ("instances", spec.name, "port"))
                lines.append(
                    f"{where}: instances.{spec.name}.port: port {spec.port} on {spec.host} is "
                    f"already used by instances.{other.name}"
                )
        seen.setdefault(spec.port, []).append(spec)
    return lines
