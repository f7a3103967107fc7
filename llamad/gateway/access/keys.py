"""The gateway's keys: which key a request carries, and the caller (`contract/caller.py`) it makes.

The door (`access/door.py`) finds the request's `Caller` once and hands it to the route
that serves it; listings, the page and the events stream show a caller only the models
it may use. Nothing here reads a request's state from anywhere but its arguments.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from llamad.common.bearer import bearer_token
from llamad.config.gateway_keys import NamedKey
from llamad.gateway.contract.caller import Caller


class Keys:
    """The configured keys, each with the caller it makes."""

    def __init__(self, keys: Iterable[NamedKey]) -> None:
        self._keys = [(k.secret.encode(), Caller(k.name, k.models)) for k in keys]

    def __bool__(self) -> bool:
        return bool(self._keys)

    def find(self, secret: bytes) -> Caller | None:
        """The caller whose key is `secret`; every key is compared, in constant time
        each, so the time taken names none."""
        found = None
        for known, caller in self._keys:
            if hmac.compare_digest(secret, known):
                found = caller
        return found


def given(api_key: bytes | None, authorization: bytes | None) -> bytes:
    """The key a request carries: x-api-key, else a Bearer token (b"" for none)."""
    if api_key:
        return api_key.strip()
    if authorization:
        return bearer_token(authorization) or b""
    return b""
