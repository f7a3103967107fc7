"""The gateway's keys: which named key a request carries, and what that key may use.

`KeyCheck` (keycheck.py) asks `lookup` for the request's key and sets `CALLER` for the task
that serves it; the lease refuses a model outside the key's list with a 403, which each
API family's routes answer in their own shape. Rate limits and strength checks belong
around `lookup`.
"""

from __future__ import annotations

import contextvars
import hmac
from collections.abc import Iterable

from starlette.types import Scope

from llamad.config.gateway_keys import NamedKey
from llamad.gateway.port import GatewayError

# The key of the request this task serves; None without keys, or for the daemon's own.
CALLER: contextvars.ContextVar[NamedKey | None] = contextvars.ContextVar("caller", default=None)

# Open without a key: the gateway's health, the page's own files (it asks for the key
# before it fetches any data), and the probes Ollama apps send before they know of a key
# (they say nothing but the version).
_OPEN = {"/health", "/ui", "/ui/", "/", "/api/version"}
_OPEN_PREFIX = "/ui/static/"


class NotAllowed(GatewayError):
    """The request's key may not use this model."""

    status = 403
    code = "model_not_allowed"

    def __init__(self, key: str, model: str) -> None:
        super().__init__(f"the key {key!r} may not use model {model!r}")


def needs_key(scope: Scope) -> bool:
    """Whether this request must carry a key (when keys are configured)."""
    path = scope["path"]
    if path == "/health":
        return False
    if path in _OPEN or path.startswith(_OPEN_PREFIX):
        return scope.get("method") not in ("GET", "HEAD")
    return True


def given(scope: Scope) -> str:
    """The key the request carries: x-api-key, else a Bearer token."""
    headers: dict[bytes, bytes] = dict(scope["headers"])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    api_key = headers.get(b"x-api-key", b"").decode("latin-1")
    return api_key or auth.removeprefix("Bearer ").strip()


def lookup(keys: Iterable[NamedKey], secret: str) -> NamedKey | None:
    """The key whose secret is `secret`; every key is compared, in constant time each."""
    found = None
    for key in keys:
        if hmac.compare_digest(secret.encode(), key.secret.encode()):
            found = key
    return found


def may_use(model: str) -> bool:
    """The request's key (if any) may use instance `model`."""
    key = CALLER.get()
    return key is None or key.models is None or model in key.models


def check(model: str) -> None:
    """Raise NotAllowed when the request's key may not use instance `model`."""
    key = CALLER.get()
    if key is not None and not may_use(model):
        raise NotAllowed(key.name, model)


def caller_name() -> str | None:
    """The name of the request's key, if it carries one."""
    key = CALLER.get()
    return None if key is None else key.name
