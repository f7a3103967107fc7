"""`[daemon.remote]`: the config table of remote control.

Structure only, like the rest of `schema.py`; files named here are read in `remote.py`.
`[fleet]` is parsed by `llamad.fleet.table`, which llamactl shares.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

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
