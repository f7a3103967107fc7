"""The gateway's own CORS answers, for an origin the door has allowed (`origin.Policy`):
llama-server's CORS headers are dropped in `relay/proxy.py`, so these are the only ones."""

from __future__ import annotations

from starlette.types import Message, Scope, Send

_PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"GET, HEAD, POST, DELETE, OPTIONS"),
    (b"access-control-max-age", b"600"),
    (b"vary", b"Origin"),
]
_VARY = (b"vary", b"Origin")
_EXPOSE = (b"access-control-expose-headers", b"Retry-After")


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((v for k, v in scope["headers"] if k == name), None)


def is_preflight(scope: Scope) -> bool:
    """A browser asking before its request whether it may send it."""
    asked = _header(scope, b"access-control-request-method")
    return scope["method"] == "OPTIONS" and asked is not None


async def preflight(scope: Scope, send: Send, origin: bytes) -> None:
    """204 with what `origin` may send."""
    asked = _header(scope, b"access-control-request-headers")
    extra = [(b"access-control-allow-headers", asked)] if asked else []
    allow = (b"access-control-allow-origin", origin)
    headers = [allow, *_PREFLIGHT_HEADERS, *extra, (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def with_cors(send: Send, origin: bytes) -> Send:
    """`send`, its answer's head telling `origin` it may read it."""
    allow = (b"access-control-allow-origin", origin)

    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), allow, _VARY, _EXPOSE]}
        await send(message)

    return send_with_cors
