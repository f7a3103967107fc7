"""The gateway's keys: which key a request carries, and the caller it makes.

The door (`access/door.py`) finds the request's `Caller` once and hands it to the route
that serves it; listings, the page and the events stream show a caller only the models
it may use. Nothing here reads a request's state from anywhere but its arguments.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from llamad.common.bearer import bearer_token
from llamad.config.gateway_keys import NamedKey


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from: a key's name and the instances it may use."""

    name: str | None = None  # the key's name; None on a gateway without keys
    models: frozenset[str] | None = None  # instance names; None: every model

    @property
    def scoped(self) -> bool:
        """Limited to some models (`models = [...]` in its `[gateway.keys.NAME]`)."""
        return self.models is not None

    def may_use(self, instance: str) -> bool:
        """This caller may use instance (or fleet model) `instance`."""
        return self.models is None or instance in self.models

    def may_use_all(self, instances: Iterable[str]) -> bool:
        """This caller may use every one of `instances` (an alias's replicas)."""
        return self.models is None or all(n in self.models for n in instances)


# A gateway without keys, and the daemon's own requests: every model.
ANYONE = Caller()


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
