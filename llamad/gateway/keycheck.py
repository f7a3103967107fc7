"""The gateway's key check, in front of every route (`[gateway.keys]`, keys.py)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.gateway.core import Gateway
from llamad.gateway.keyguard import KeyGuard
from llamad.gateway.keys import CALLER, given, lookup, needs_key
from llamad.gateway.shapes import refuse


class KeyCheck:
    """Bearer or x-api-key against the gateway's keys (`keys.py`); /health, the page's
    files and the probes Ollama apps send before they know of any key (GET or HEAD of /
    and /api/version, which say nothing but the version) stay open. The key found serves
    the request as `keys.CALLER`. Wrong keys are counted per address by `guard`, which
    answers 429 to an address past its limit."""

    def __init__(self, app: ASGIApp, gateway: Gateway, guard: KeyGuard | None = None) -> None:
        self.app, self.gateway, self.guard = app, gateway, guard or KeyGuard()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        keys = self.gateway.settings().keys
        if scope["type"] == "http" and keys and needs_key(scope):
            path = scope["path"]
            if (wait := self.guard.blocked(scope)) is not None:
                await refuse(send, path, 429, "rate_limited", "too many wrong keys; wait", wait)
                return
            secret = given(scope)
            key = lookup(keys, secret)  # every key compared in constant time: none revealed
            if key is None:
                self.guard.failed(scope, bool(secret))
                message = "a valid API key is required (Bearer or x-api-key)"
                await refuse(send, path, 401, "invalid_api_key", message)
                return
            token = CALLER.set(key)
            try:
                await self.app(scope, receive, send)
            finally:
                CALLER.reset(token)
            return
        await self.app(scope, receive, send)
