"""`[daemon.remote]` and `[fleet]`: the config tables of remote control and of the fleet.

Structure only, like the rest of `config.py`; files named here are read in `remote.py`
(the daemon's side) and by llamactl, which reads `[fleet]` with tomllib alone.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, field_validator, model_validator

DEFAULT_PORT = 7777


def split_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::]:PORT`) -> (host, port); ValueError when malformed."""
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"must be HOST:PORT, e.g. 0.0.0.0:{DEFAULT_PORT} (got {value!r})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 address must be in brackets, e.g. [::]:7777 (got {value!r})")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"port must be a number from 1 to 65535 (got {value!r})")
    return host, int(port)


class RemoteSettings(BaseModel):
    """`[daemon.remote]`: the control API on TCP, for bearer-token holders only."""

    model_config = ConfigDict(extra="forbid")

    listen: str
    token_file: str  # admin: every route
    read_token_file: str | None = None  # read-only: GET routes (status, logs)
    tls_cert: str | None = None
    tls_key: str | None = None
    advertise: bool = True  # mDNS/DNS-SD `_llamad._tcp`

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        split_listen(value)
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> RemoteSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: set both or neither")
        return self


class PeerSettings(BaseModel):
    """One `[[fleet.peers]]` entry: another llamad that `llamactl fleet status` asks."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    url: str
    token_file: str | None = None
    ca_file: str | None = None  # trust this CA (e.g. a self-signed cert) for https
    gateway_key_file: str | None = None  # the peer's `[gateway] api_key_file` key

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        return value


class FleetSettings(BaseModel):
    """`[fleet]`: which daemons llamactl knows about; llamad uses `peers` for RPC heads'
    `peer/worker` names."""

    model_config = ConfigDict(extra="forbid")

    peers: list[PeerSettings] = []
    token_file: str | None = None  # for peers without their own: Tailscale, mDNS, URLs
    timeout: PositiveFloat = 2.0
    tailscale_tag: str | None = None
    tailscale_port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)

    @model_validator(mode="after")
    def _unique_names(self) -> FleetSettings:
        names = [p.name for p in self.peers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"peer names must be unique: {', '.join(dupes)}")
        if "local" in names:
            raise ValueError("peer name 'local' is taken by the daemon on this machine")
        return self
