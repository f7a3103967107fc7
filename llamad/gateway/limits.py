"""The gateway's request limits: `[gateway] max_body`, an instance's own, the deadline.

The listener (`llamad/listener`) refuses a body over the largest limit any model
has, by its Content-Length before reading it or as a chunked body grows. Only when some
instance allows more than `[gateway] max_body` does a body between the two need its
model named, so `BodyLimit` reads that one whole (it is under the largest limit) and
answers 413 if its model allows less. Every other request passes straight through.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llamad.backends.spec import InstanceSpec
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.families import gateway_shape
from llamad.listener.limits import Limits, Refused, body_too_large

__all__ = ["BodyLimit", "GatewayLimits", "gateway_shape"]


class GatewayLimits:
    """The limits in force, from the current `[gateway]` and instances (reloads apply)."""

    def __init__(
        self, settings: Callable[[], GatewayConfig], specs: Callable[[], Mapping[str, InstanceSpec]]
    ) -> None:
        self.settings, self.specs = settings, specs
        self._seen: tuple[object, object] | None = None
        self._limits = Limits()

    def __call__(self) -> Limits:
        """The listener's limits: a body up to the largest any model allows."""
        s, specs = self.settings(), self.specs()
        if self._seen is None or self._seen[0] is not s or self._seen[1] is not specs:
            ceiling = max([s.max_body, *(spec.max_body or 0 for spec in specs.values())])
            self._limits = Limits(
                max_body=ceiling,
                request_timeout=s.request_timeout,
                trust_loopback=s.trust_loopback,
            )
            self._seen = (s, specs)
        return self._limits

    @property
    def default(self) -> int:
        """`[gateway] max_body`."""
        return self.settings().max_body

    def for_model(self, name: str) -> int:
        """The body limit for requests to model `name` (an instance name or alias; the
        largest of its replicas' when instances share it: any of them may serve it)."""
        name = name.removesuffix(":latest")
        found = [
            spec.max_body or self.default
            for spec in self.specs().values()
            if name == spec.name or name in spec.aliases
        ]
        return max(found, default=self.default)


class BodyLimit:
    """ASGI middleware: a body over `[gateway] max_body` must be for a model that allows it."""

    def __init__(self, app: ASGIApp, limits: GatewayLimits, refused: Refused) -> None:
        self.app, self.limits, self.refused = app, limits, refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limits().max_body == self.limits.default:
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) <= self.limits.default:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone: nobody to answer
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if len(body) > self.limits.default:
            cap = self.limits.for_model(_model(scope, body))
            if len(body) > cap:
                client = scope.get("client")
                self.refused("body_too_large", client[0] if client else None)
                await _refuse(scope, send, body_too_large(cap).message)
                return
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def _model(scope: Scope, body: bytes) -> str:
    path: str = scope["path"]
    if path.startswith("/upstream/"):
        return path.removeprefix("/upstream/").split("/", 1)[0]
    try:
        doc: Any = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    name = doc.get("model") or doc.get("name") if isinstance(doc, dict) else None
    return name if isinstance(name, str) else ""


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    body = gateway_shape(scope["path"], 413, "body_too_large", message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
