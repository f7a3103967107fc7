"""Bearer-token auth for the control API on TCP, as an ASGI wrapper around the same app.

The Unix socket is served the bare app (its guard is the peer uid); TCP gets
`BearerAuth(app, ...)`. Two tokens: admin for every route, read-only for GET (status,
instance, logs). Anything but GET/HEAD needs admin, so a route added later is admin-only
until someone decides otherwise. Failed attempts are counted per client address and a
client that fails too often is answered 429 for the rest of the window, whatever it sends.
"""

from __future__ import annotations

import hmac

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.api.errors import error_response
from llamad.common.bearer import bearer_token
from llamad.common.ratelimit import RateLimiter

__all__ = ["BearerAuth", "RateLimiter"]

log = structlog.get_logger("llamad.remote")

READ_METHODS = frozenset({"GET", "HEAD"})
# The scope key the app reads the caller's role from ("admin" or "read"; absent on the
# Unix socket): the read token is a limited key (`common/long_streams.py`).
ROLE = "llamad.role"


class BearerAuth:
    """ASGI middleware: `Authorization: Bearer TOKEN` or 401; read-only token on a
    write route 403; too many failures from one address 429. Errors carry no details."""

    def __init__(
        self,
        app: ASGIApp,
        admin_token: str,
        read_token: str | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.app = app
        self._admin = admin_token.encode()
        self._read = read_token.encode() if read_token else None
        # An empty limiter has length 0, so it is false: only None means "none given".
        self.limiter = RateLimiter() if limiter is None else limiter

    def _role(self, scope: Scope) -> str | None:
        header = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                header = value
        token = bearer_token(header)
        if token is None:
            return None
        is_admin = hmac.compare_digest(token, self._admin)
        # Always a second comparison (against admin when there is no read token), so the
        # time taken says nothing about which token, if any, matched.
        is_read = hmac.compare_digest(token, self._read or self._admin) and self._read is not None
        return "admin" if is_admin else "read" if is_read else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The peer address as the socket reports it: X-Forwarded-For would let anyone
        # pick a fresh address per attempt.
        client = scope["client"][0] if scope.get("client") else "?"
        wait = self.limiter.retry_after(client)
        if wait is not None:
            retry = {"retry-after": str(int(wait) + 1)}
            await error_response(429, "rate_limited", "too many failed attempts", **retry)(
                scope, receive, send
            )
            return
        role = self._role(scope)
        if role is None:
            if self.limiter.fail(client):
                log.warning("remote.client_blocked", client=client, window_s=self.limiter.window_s)
            else:
                log.debug("remote.unauthorized", client=client)
            challenge = {"www-authenticate": 'Bearer realm="llamad"'}
            await error_response(401, "unauthorized", "unauthorized", **challenge)(
                scope, receive, send
            )
            return
        if role == "read" and scope["method"] not in READ_METHODS:
            await error_response(403, "forbidden", "forbidden")(scope, receive, send)
            return
        await self.app({**scope, ROLE: role}, receive, send)
