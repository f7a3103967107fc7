"""Secrets stay out of error text: a config line names a secret key, never its value.

Config errors travel far (`config.rejected` in the daemon log, `daemon.config_error` in
the status document that the read-only token can fetch over TCP, `llamactl reload`), so a
typo around `api_key` must not print the key itself.
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[redacted]"
_EXACT = {"api_key", "hf_token", "api-key", "hf-token"}


def is_secret_key(key: object) -> bool:
    """Whether a key (TOML key or env name) holds a secret: api_key, hf_token, *_key, *token*."""
    name = str(key).lower()
    return name in _EXACT or name.endswith(("_key", "-key")) or "token" in name


def any_secret(keys: Iterable[object]) -> bool:
    """Whether any key on a dotted path holds a secret (e.g. `env.MY_TOKEN`)."""
    return any(is_secret_key(k) for k in keys)


def shown(keys: Iterable[object], value: object) -> str:
    """`repr(value)` for an error message, or `[redacted]` under a secret key."""
    return REDACTED if any_secret(keys) else repr(value)


def scrub(text: str, value: object) -> str:
    """`text` with every string inside `value` (a scalar, list or table) blanked out."""
    for part in _strings(value):
        if part:
            text = text.replace(repr(part), REDACTED).replace(part, REDACTED)
    return text


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)
