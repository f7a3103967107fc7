"""Who may reach the gateway: `allowed_origins` and `allowed_hosts` entries, and the
warning for a keyless gateway in front of an instance that has a key of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from llamad.backends.spec import InstanceSpec

_ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s?#]+$")
_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)$")
# How an instance's own key reaches llama-server (see gateway/relay/instance_auth.py).
_KEY_SETTINGS = {"LLAMA_API_KEY": "api_key", "LLAMA_ARG_API_KEY_FILE": "api_key_file"}


def origin_entry(value: str) -> str:
    """An `allowed_origins` entry: `*`, `null`, or `scheme://host[:port]`, lower-cased."""
    origin = value.strip().lower().rstrip("/")
    if origin not in ("*", "null") and not _ORIGIN.match(origin):
        raise ValueError(
            f'must be "*" or an origin like "http://localhost:3000", no path (got {value!r})'
        )
    return origin


def host_entry(value: str) -> str:
    """An `allowed_hosts` entry: `*` or a host name (any port), lower-cased."""
    host = value.strip().lower()
    if host != "*" and not _HOST.match(host):
        raise ValueError(f'must be "*" or a host name like "studio.local", no port (got {value!r})')
    return host


def bypassed_keys(specs: Mapping[str, InstanceSpec]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(keys, message) for each instance whose own key a keyless gateway bypasses: the
    gateway adds that key upstream, so anyone who reaches the gateway is let in."""
    for spec in specs.values():
        settings = dict(spec.settings)
        for env, key in _KEY_SETTINGS.items():
            if settings.get(env):
                yield (
                    ("instances", spec.name, key),
                    "the gateway has no api_key_file, so its clients use this instance "
                    "without its key",
                )
                break
