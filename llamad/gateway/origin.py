"""Browsers are held off: a page on another origin cannot use the gateway, and a name
rebound to this machine (DNS rebinding) is not answered.

A cross-origin `text/plain` POST needs no CORS preflight, so refusing to answer it is
not enough when the request itself does the harm (it starts a model, it generates); and
llama-server reflects any `Origin` back, which let every page read the answers. Here a
request carrying an `Origin` that is neither configured (`allowed_origins`) nor the
gateway's own is refused before any route, whatever its method or content type, and the
gateway answers CORS itself (llama-server's headers are dropped in `proxy.py`).

`Host` must name this listener: its own address (any loopback form on loopback, with
its port), this machine's name, or one of `allowed_hosts`. A rebinding page's requests
carry the attacker's name, so they stop here even on a keyless gateway. A request with
no `Host` (HTTP/1.0) comes from no browser and passes. Both checks are header lookups:
no body is read.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llamad.common.hosts import client_key, is_loopback
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.shapes import refuse
from llamad.listener.limits import Refused

_PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"GET, HEAD, POST, DELETE, OPTIONS"),
    (b"access-control-max-age", b"600"),
    (b"vary", b"Origin"),
]
_VARY = (b"vary", b"Origin")
_EXPOSE = (b"access-control-expose-headers", b"Retry-After")
_LOOPBACK_NAMES = ("localhost",)
# Names under these suffixes cannot be pointed at us by a stranger's DNS: mDNS on the
# local link, and Tailscale's MagicDNS for this tailnet.
_OWN_SUFFIXES = (".local", ".ts.net")


class Policy:
    """Who may call, from one `[gateway]`'s lists and this machine's name."""

    def __init__(self, settings: GatewayConfig, hostname: str) -> None:
        self.origins = settings.allowed_origins
        self.hosts = settings.allowed_hosts
        self.hostname = hostname.lower().split(".")[0]
        self._seen: dict[tuple[bytes, str, int], bool] = {}

    def host_ok(self, host: bytes, server: tuple[str, int] | None) -> bool:
        """`host` (the header) names this listener, reached at `server`."""
        if "*" in self.hosts:
            return True
        key = (host, *(server or ("", 0)))
        known = self._seen.get(key)
        if known is None:
            known = self._host_ok(host.decode("latin-1").lower(), server)
            if len(self._seen) > 256:  # bounded: a client may send any names it likes
                self._seen.clear()
            self._seen[key] = known
        return known

    def _host_ok(self, host: str, server: tuple[str, int] | None) -> bool:
        name, port = _split(host)
        if name in self.hosts:
            return True  # a configured name, at whatever port a proxy in front uses
        local, local_port = server or ("", 0)
        local = local.lower().removeprefix("::ffff:")  # an IPv4 client on an IPv6 socket
        if port != local_port:
            return False
        if name in (local, self.hostname) or self._own_name(name):
            return True
        return is_loopback(local) and (is_loopback(name) or name in _LOOPBACK_NAMES)

    def _own_name(self, name: str) -> bool:
        # This machine under a suffix only our own resolvers answer for.
        first, _, rest = name.partition(".")
        return first == self.hostname and any(("." + rest).endswith(s) for s in _OWN_SUFFIXES)

    def origin_ok(self, origin: bytes, host: bytes | None) -> bool:
        """`origin` is allowed: configured, or the gateway's own (same origin)."""
        text = origin.decode("latin-1").lower().rstrip("/")
        if "*" in self.origins or text in self.origins:
            return True
        if host is None:
            return False
        own = host.decode("latin-1").lower()
        return text in (f"http://{own}", f"https://{own}")


class OriginGuard:
    """ASGI middleware: Host and Origin checks, the gateway's own CORS answers."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Callable[[], GatewayConfig],
        refused: Refused,
        hostname: Callable[[], str] = socket.gethostname,
    ) -> None:
        self.app, self.settings, self.refused, self.hostname = app, settings, refused, hostname
        self._policy: tuple[GatewayConfig, Policy] | None = None

    def policy(self) -> Policy:
        """The policy for the settings in force (rebuilt when a reload changes them)."""
        now = self.settings()
        if self._policy is None or self._policy[0] is not now:
            self._policy = (now, Policy(now, self.hostname()))
        return self._policy[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
        policy = self.policy()
        if host is not None and not policy.host_ok(host, scope.get("server")):
            await self._refuse(scope, send, "host_not_allowed", "this Host is not served here")
            return
        if origin is None:
            await self.app(scope, receive, send)  # no browser, or a same-origin GET
            return
        if not policy.origin_ok(origin, host):
            await self._refuse(
                scope, send, "origin_not_allowed", "this origin is not allowed; see allowed_origins"
            )
            return
        allow = (b"access-control-allow-origin", origin)
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method"):
            asked = _header(scope, b"access-control-request-headers")
            extra = [(b"access-control-allow-headers", asked)] if asked else []
            headers = [allow, *_PREFLIGHT_HEADERS, *extra, (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), allow, _VARY]}
                message["headers"].append(_EXPOSE)
            await send(message)

        await self.app(scope, receive, with_cors)

    async def _refuse(self, scope: Scope, send: Send, reason: str, message: str) -> None:
        client = scope.get("client")
        self.refused(reason, client_key(client[0]) if client else None)
        await refuse(send, scope["path"], 403, reason, message)


def _split(host: str) -> tuple[str, int]:
    """`name:port` -> (name, port); IPv6 in brackets; port 80 when none is given."""
    name, port = host, ""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    # ASCII digits only: "²" is a digit to str.isdigit, not to int().
    return name, int(port) if port.isascii() and port.isdigit() else 80


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((v for k, v in scope["headers"] if k == name), None)
