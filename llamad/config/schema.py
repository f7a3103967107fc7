"""The shape of `llamad.toml`, read with pydantic-settings, and its errors as one-liners.

This module checks structure only: tables, daemon and supervise keys, types. What each
instance's llama-server keys mean is decided in `spec.py` against the installed binary.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
)
from pydantic import ValidationError as PydanticError
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from llamad.backends.registry import DEFAULT_KIND
from llamad.config.fleet_tables import RemoteSettings
from llamad.config.gateway_table import GatewaySettings
from llamad.config.tomlpos import locate
from llamad.fleet.table import Fleet, parse_fleet

Scalar = str | int | float | bool
Value = Scalar | list[Scalar]

_toml_file: ContextVar[Path] = ContextVar("llamad_toml_file")


class ConfigError(Exception):
    """A config that cannot be used; `lines` holds one clear line per problem."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


class DaemonSettings(BaseModel):
    """`[daemon]`: where the daemon finds llama-server and keeps its files."""

    model_config = ConfigDict(extra="forbid")

    llama_server: str | None = None
    rpc_server: str | None = None
    mlx_server: str | None = None
    state_dir: str | None = None
    socket: str | None = None
    log_dir: str | None = None
    log_max_bytes: PositiveInt = 10 * 1024 * 1024
    log_backups: NonNegativeInt = 3
    log_level: str = Field(default="info", pattern="^(debug|info|warning|error)$")
    reexport_metrics: bool = False
    remote: RemoteSettings | None = None  # fleet: the control API on TCP


class SuperviseSettings(BaseModel):
    """`[supervise]`: how instances are watched and restarted; overridable per instance."""

    model_config = ConfigDict(extra="forbid")

    health_interval: PositiveFloat = 5.0
    health_timeout: PositiveFloat = 2.0
    unhealthy_after: PositiveInt = 3
    start_timeout: PositiveFloat = 600.0
    stop_timeout: PositiveFloat = 10.0
    backoff_initial: PositiveFloat = 1.0
    backoff_max: PositiveFloat = 60.0
    max_restarts: NonNegativeInt = 5
    restart_window: PositiveFloat = 600.0
    deep_probe_interval: NonNegativeFloat = 60.0  # 0 = off; backends with a deep probe only
    deep_probe_timeout: PositiveFloat = 30.0


class InstanceTable(BaseModel):
    """`[instances.NAME]`: llamad's own keys; every other key is a llama-server setting."""

    model_config = ConfigDict(extra="allow")

    kind: str = DEFAULT_KIND  # checked against the backend registry when resolving
    args: list[str] = []
    env: dict[str, Scalar] = {}
    autostart: bool = True
    watch_model: bool = True
    supervise: dict[str, Any] = {}
    on_demand: bool = False
    idle_timeout: NonNegativeFloat = 600.0
    aliases: list[str] = []


class ConfigFile(BaseSettings):
    """The whole file. Sources: keyword arguments, then the TOML file being loaded."""

    model_config = SettingsConfigDict(extra="forbid", arbitrary_types_allowed=True)

    daemon: DaemonSettings = DaemonSettings()
    supervise: SuperviseSettings = SuperviseSettings()
    defaults: dict[str, Value] = {}
    instances: dict[str, InstanceTable] = {}
    # Read by llamactl too, so parsed by fleet.table's stdlib parser (see read_file).
    # Peers also serve RPC heads.
    fleet: Fleet = Fleet()
    gateway: GatewaySettings = GatewaySettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is the single source of truth: no environment or dotenv overrides.
        return (init_settings, TomlConfigSettingsSource(settings_cls, toml_file=_toml_file.get()))


_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_file(path: Path) -> tuple[ConfigFile, str]:
    """Parse and structurally validate `path`; returns the model and the file's text."""
    # pydantic-settings silently skips a missing TOML file, so check it here.
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: config file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read config file: {exc}"]) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        at = _TOML_AT.search(msg)
        where = f"{path}:{at.group(1)}" if at else str(path)
        raise ConfigError([f"{where}: invalid TOML: {_TOML_AT.sub('', msg).strip()}"]) from None
    fleet, fleet_problems = parse_fleet(raw.get("fleet", {}), path.parent)
    lines = [
        f"{where_is(path, text, ('fleet', *p.keys))}: {p.dotted}: {p.message}"
        for p in fleet_problems
    ]
    token = _toml_file.set(path)
    try:
        cfg = ConfigFile(fleet=fleet)  # given, it takes the place of the file's raw table
    except PydanticError as exc:
        raise ConfigError(_pydantic_lines(path, text, exc) + lines) from None
    finally:
        _toml_file.reset(token)
    if lines:
        raise ConfigError(lines)
    bad = [n for n in cfg.instances if not _INSTANCE_NAME.match(n)]
    if bad:
        raise ConfigError(
            f"{where_is(path, text, ('instances', n))}: instance name {n!r} must be letters, "
            "digits, '.', '_' or '-' (at most 64)"
            for n in bad
        )
    return cfg, text


def where_is(path: Path, text: str, keys: tuple[str | int, ...]) -> str:
    """`file:line` for a dotted key when the line can be found, else just the file."""
    line = locate(text, tuple(str(k) for k in keys))
    return f"{path}:{line}" if line else str(path)


def _pydantic_lines(path: Path, text: str, exc: PydanticError) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        dotted = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {str(loc[-1])!r}"
            hint = _suggest(loc)
            if hint:
                msg += f" (did you mean {hint}?)"
            dotted = ".".join(str(p) for p in loc[:-1]) or "top level"
        elif err["type"] == "missing":
            msg = "is required"
        else:
            msg = describe(err)
        lines.append(f"{where_is(path, text, loc)}: {dotted}: {msg}")
    return lines


def describe(err: ErrorDetails) -> str:
    """A pydantic error as the tail of one of our lines: 'must be ... (got X)'."""
    if err["type"] == "value_error" and "error" in err.get("ctx", {}):
        return str(err["ctx"]["error"])  # our validators' messages already say what was got
    msg = err["msg"]
    return f"{msg[:1].lower()}{msg[1:]} (got {err.get('input')!r})"


def _suggest(loc: tuple[Any, ...]) -> str | None:
    import difflib

    # The table holding the unknown key: its path with list indices dropped.
    section = ".".join(str(p) for p in loc[:-1] if not isinstance(p, int)) or None
    fields = {
        "daemon": DaemonSettings.model_fields,
        "daemon.remote": RemoteSettings.model_fields,
        "supervise": SuperviseSettings.model_fields,
        "gateway": GatewaySettings.model_fields,
        None: ConfigFile.model_fields,
    }.get(section, {})
    match = difflib.get_close_matches(str(loc[-1]), list(fields), n=1)
    return match[0] if match else None
