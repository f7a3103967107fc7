"""The shape of `llamad.toml`, read with pydantic-settings (its errors: `messages.py`).

This module checks structure only: tables, daemon and supervise keys, types. What each
instance's llama-server keys mean is decided in `spec.py` against the installed binary.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from llamad.backends.registry import DEFAULT_KIND
from llamad.config.fleet_tables import RemoteSettings
from llamad.config.gateway_table import GatewaySettings, body_size, byte_size
from llamad.config.library_table import LibrarySettings
from llamad.config.tomlpos import where_is
from llamad.fleet.table import Fleet, parse_fleet

Scalar = str | int | float | bool
Value = Scalar | list[Scalar]

_toml_file: ContextVar[Path | None] = ContextVar("llamad_toml_file", default=None)


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
    # The stdlib handler never rolls over without a backup: 0 would grow the log forever.
    log_backups: PositiveInt = 3
    log_level: str = Field(default="info", pattern="^(debug|info|warning|error)$")
    reexport_metrics: bool = False
    remote: RemoteSettings | None = None  # fleet: the control API on TCP
    # The prompt cache kept across processes: on for every instance unless turned off.
    prompt_cache: bool = True
    cache_dir: str | None = None
    cache_max: str | None = None  # a size, e.g. "10GiB"; default bounded by free space
    # A crash loses at most the last turn: an idle slot that holds this many tokens is
    # saved in the background once it changed (0: only before planned stops).
    cache_save_tokens: NonNegativeInt = 512
    cache_save_interval: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 2.0
    # Keep the system from idle sleep while the gateway has requests (macOS caffeinate).
    keep_awake: bool = True


# Durations are finite: `inf` would hang a stop and break the service files' timeouts.
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# A probe every few milliseconds is a busy loop, not supervision.
Interval = Annotated[float, Field(ge=0.05, allow_inf_nan=False)]


class SuperviseSettings(BaseModel):
    """`[supervise]`: how instances are watched and restarted; overridable per instance."""

    model_config = ConfigDict(extra="forbid")

    health_interval: Interval = 5.0
    health_timeout: Seconds = 2.0
    unhealthy_after: PositiveInt = 3
    start_timeout: Seconds = 600.0
    stop_timeout: Seconds = 10.0
    backoff_initial: Seconds = 1.0
    backoff_max: Seconds = 60.0
    max_restarts: NonNegativeInt = 5
    restart_window: Seconds = 600.0
    deep_probe_interval: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 60.0  # 0 = off
    deep_probe_timeout: Seconds = 30.0


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
    prompt_cache: bool | None = None  # None: the daemon's
    cache_swa_full: bool = False  # keep a sliding-window model's slots whatever it costs
    evict: Literal["auto", "never"] = "auto"  # "never": pinned once loaded
    aliases: list[str] = []
    max_body: str | None = None  # the gateway's [gateway] max_body, for this model
    memory_estimate: str | None = None  # what the model needs, over llamad's own estimate
    # Request defaults the gateway adds where a request sets none (over a store's own).
    system: str | None = None
    stop: list[Annotated[str, Field(min_length=1)]] | None = None

    @field_validator("max_body")
    @classmethod
    def _max_body(cls, value: str | None) -> str | None:
        if value is not None:
            body_size(value)
        return value

    @field_validator("memory_estimate")
    @classmethod
    def _memory_estimate(cls, value: str | None) -> str | None:
        if value is not None and byte_size(value) is None:
            raise ValueError(f'must be a size like "12GiB" (got {value!r})')
        return value


class ConfigFile(BaseSettings):
    """The whole file. Sources: keyword arguments, then the TOML file being loaded."""

    model_config = SettingsConfigDict(extra="forbid", arbitrary_types_allowed=True)

    daemon: DaemonSettings = DaemonSettings()
    supervise: SuperviseSettings = SuperviseSettings()
    defaults: dict[str, Value] = {}
    instances: dict[str, InstanceTable] = {}
    # Read by llamactl too, so parsed by fleet.table's stdlib parser (see fleet_of).
    # Peers also serve RPC heads.
    fleet: Fleet = Fleet()
    gateway: GatewaySettings = GatewaySettings()
    library: LibrarySettings | None = None  # None: on when the gateway listens

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


def settings_of(cfg: ConfigFile) -> LibrarySettings | None:
    """`[library]` when it is on: as written, or by default when the gateway listens."""
    if cfg.library is None:
        return LibrarySettings() if cfg.gateway.listen else None
    return cfg.library if cfg.library.enabled else None


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_text(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML document; a missing, unreadable or invalid file raises."""
    # pydantic-settings silently skips a missing TOML file, so check it here.
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: config file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read config file: {exc}"]) from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        at = _TOML_AT.search(msg)
        where = f"{path}:{at.group(1)}" if at else str(path)
        raise ConfigError([f"{where}: invalid TOML: {_TOML_AT.sub('', msg).strip()}"]) from None


def fleet_of(path: Path, text: str, raw: dict[str, Any]) -> tuple[Fleet, list[str]]:
    """`[fleet]`, parsed by fleet.table's stdlib parser (llamactl reads it too), its paths
    anchored at the config's directory, and its problems as lines."""
    fleet, problems = parse_fleet(raw.get("fleet", {}), path.parent)
    return fleet, [
        f"{where_is(path, text, ('fleet', *p.keys))}: {p.dotted}: {p.message}" for p in problems
    ]


def validate_file(path: Path | None, data: dict[str, Any]) -> ConfigFile:
    """The file read through pydantic-settings' TOML source, with `data` (at least the
    parsed `fleet`) taking the place of its tables; with no path, `data` alone. Raises
    pydantic's error."""
    token = _toml_file.set(path)
    try:
        return ConfigFile(**data)
    finally:
        _toml_file.reset(token)
