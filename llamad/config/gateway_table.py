"""`[gateway]`: the one OpenAI-compatible endpoint in front of every instance.

The table's structure is checked by pydantic; `resolve_gateway` then reads the key file,
parses the memory budget and checks what needs the instances too: the model names
(model_names.py), and a listen address no instance uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from llamad.backends.spec import InstanceSpec
from llamad.common.hosts import is_loopback, same_address
from llamad.config.fleet_tables import split_listen
from llamad.config.gateway_access import host_entry, origin_entry
from llamad.config.gateway_keys import KeySettings, NamedKey, resolve_keys
from llamad.config.model_names import check_names, owners
from llamad.config.model_sets import (
    MembersSettings,
    ModelSet,
    check_choosers,
    check_overlap,
    check_pins,
    resolve_sets,
)

Budget = int | Literal["auto"] | None  # bytes, "auto" (free memory, measured live), None: off

_BYTES: TypeAdapter[ByteSize] = TypeAdapter(ByteSize)


def byte_size(text: str) -> int | None:
    """'24GiB', '24G', '512MB', '1.5 GiB', '1000' -> bytes, as pydantic's ByteSize reads
    them; None when `text` is not a size."""
    try:
        return int(_BYTES.validate_python(text))
    except ValidationError:
        return None


# Admits any real chat: a 128k-token conversation is ~0.5 MB of JSON, and a dozen
# full-size photos as base64 (a third larger than the files) fit several times over.
DEFAULT_MAX_BODY = "32MiB"


def body_size(value: str) -> int:
    """A `max_body` value in bytes; ValueError (the message for the config line) if not a size."""
    size = byte_size(value)
    if size is None:
        raise ValueError(f'must be a size like "32MiB" (got {value!r})')
    if size <= 0:
        raise ValueError(f"must be more than 0 bytes (got {value!r})")
    return size


class GatewaySettings(BaseModel):
    """`[gateway]` as written in the file."""

    model_config = ConfigDict(extra="forbid")

    listen: str | None = None
    api_key_file: str | None = None
    max_loaded: NonNegativeInt = 0
    memory_budget: str = "auto"
    queue_timeout: PositiveFloat = 120.0
    max_queue: PositiveInt = 64
    fleet: bool = False  # also route to models that `[fleet]` peers serve
    affinity: bool = True  # a conversation's next turn goes where its prefix is cached
    affinity_size: PositiveInt = 10000  # prompt prefixes remembered per model (LRU)
    keys: dict[str, KeySettings] = {}  # [gateway.keys.NAME]
    activity_size: PositiveInt = 1000  # requests kept for /v1/activity
    max_body: str = DEFAULT_MAX_BODY  # an instance's own `max_body` may raise it
    request_timeout: PositiveFloat = 60.0  # head and body, from the head's first byte
    # A stream waiting on its model gets keep-alive bytes this often (0: never), so that a
    # proxy in between does not cut it.
    keepalive_interval: NonNegativeFloat = 10.0
    trust_loopback: bool = False  # loopback clients are exempt from the per-address share
    allowed_origins: list[str] = []  # browser origins that may call it ("*": any)
    allowed_hosts: list[str] = []  # more names the Host header may carry ("*": any)
    allow_keyless_remote: bool = False  # a listen beyond loopback without api_key_file
    # After SIGTERM: seconds `/ready` says 503 while everything is still served (a load
    # balancer's probe takes this daemon out meanwhile), then seconds the requests in
    # flight get to finish once no new connection is taken.
    shutdown_delay: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    shutdown_grace: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 10.0

    list_aliases: bool = True  # aliases as entries of their own in /v1/models and /api/tags
    groups: dict[str, MembersSettings] = {}  # [gateway.groups.NAME]: loaded together
    exclusive: dict[str, MembersSettings] = {}  # [gateway.exclusive.NAME]: one at a time
    names: dict[str, MembersSettings] = {}  # [gateway.names.NAME]: the first loaded

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        return [origin_entry(v) for v in value]

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [host_entry(v) for v in value]

    @field_validator("max_body")
    @classmethod
    def _max_body(cls, value: str) -> str:
        body_size(value)
        return value

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            split_listen(value)
        return value

    @field_validator("memory_budget")
    @classmethod
    def _budget(cls, value: str) -> str:
        if value not in ("auto", "off") and byte_size(value) is None:
            raise ValueError(f'must be "auto", "off" or a size like "24GiB" (got {value!r})')
        return value


@dataclass(frozen=True)
class GatewayConfig:
    """`[gateway]` resolved. Keys stay out of repr(): daemon logs show dataclasses."""

    host: str
    port: int
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # every key's secret
    max_loaded: int = 0
    memory_budget: Budget = "auto"
    queue_timeout: float = 120.0
    max_queue: int = 64
    fleet: bool = False
    affinity: bool = True
    affinity_size: int = 10000
    keys: tuple[NamedKey, ...] = field(default=(), repr=False)  # api_key_file's, named ones
    activity_size: int = 1000
    max_body: int = 32 * 1024 * 1024
    request_timeout: float = 60.0
    keepalive_interval: float = 10.0
    trust_loopback: bool = False
    allowed_origins: frozenset[str] = frozenset()  # lower case, no trailing slash
    allowed_hosts: frozenset[str] = frozenset()  # lower case, no port
    list_aliases: bool = True
    shutdown_delay: float = 0.0
    shutdown_grace: float = 10.0
    groups: tuple[ModelSet, ...] = ()
    exclusive: tuple[ModelSet, ...] = ()
    names: tuple[ModelSet, ...] = ()


Problem = Callable[[tuple[str, ...], str], None]


def resolve_gateway(
    settings: GatewaySettings,
    specs: Mapping[str, InstanceSpec],
    problem: Problem,
    base: Path,
) -> GatewayConfig | None:
    """The gateway to serve, or None without `listen`; problems go through `problem`
    as (keys, message), keys starting at the top of the file. Relative paths are taken
    from `base`, the file's directory."""
    check_names(specs, problem)
    if settings.listen is None:
        return None
    host, port = split_listen(settings.listen)
    for spec in specs.values():
        if spec.port == port and same_address(spec.host, host):
            problem(("gateway", "listen"), f"port {port} is already used by instances.{spec.name}")
    owner = owners(specs)
    groups = resolve_sets("groups", settings.groups, specs, owner, problem)
    check_pins(groups, specs, problem)
    exclusive = resolve_sets("exclusive", settings.exclusive, specs, owner, problem)
    check_overlap(groups, exclusive, problem)
    names = resolve_sets("names", settings.names, specs, owner, problem)
    check_choosers(names, owner, problem)
    # A key may be scoped to a name that chooses: the name, not its models.
    owner |= {n.name: frozenset([n.name]) for n in names}
    keys = resolve_keys(settings.api_key_file, settings.keys, owner, problem, base)
    if not keys and not is_loopback(host) and not settings.allow_keyless_remote:
        problem(
            ("gateway", "listen"),
            f"{settings.listen} is reachable beyond this machine and the gateway has no "
            "api_key_file (nor [gateway.keys]): set one, or allow_keyless_remote = true",
        )
    budget: Budget = None
    if settings.memory_budget == "auto":
        budget = "auto"
    elif settings.memory_budget != "off":
        budget = byte_size(settings.memory_budget)
    return GatewayConfig(
        host=host,
        port=port,
        api_keys=tuple(k.secret for k in keys),
        max_loaded=settings.max_loaded,
        memory_budget=budget,
        queue_timeout=settings.queue_timeout,
        max_queue=settings.max_queue,
        fleet=settings.fleet,
        affinity=settings.affinity,
        affinity_size=settings.affinity_size,
        keys=keys,
        activity_size=settings.activity_size,
        max_body=body_size(settings.max_body),
        request_timeout=settings.request_timeout,
        keepalive_interval=settings.keepalive_interval,
        trust_loopback=settings.trust_loopback,
        allowed_origins=frozenset(settings.allowed_origins),
        allowed_hosts=frozenset(settings.allowed_hosts),
        list_aliases=settings.list_aliases,
        shutdown_delay=settings.shutdown_delay,
        shutdown_grace=settings.shutdown_grace,
        groups=groups,
        exclusive=exclusive,
        names=names,
    )
