"""The gateway's HTTP routes: OpenAI-compatible paths routed by model, and its own.

Routes are raw ASGI (no Request/Response objects on the hot path); other route sets,
such as an Ollama facade, are mounted beside them with `build_app(..., extra_routes)`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.gateway.activity import CURRENT, begin
from llamad.gateway.core import Gateway
from llamad.gateway.keys import CALLER, given, lookup, needs_key
from llamad.gateway.pool import Pool
from llamad.gateway.port import GatewayError, ModelView
from llamad.gateway.proxy import (
    Bad,
    ClientGone,
    Relay,
    guard,
    now,
    read_body,
)
from llamad.gateway.resend import answered

# Routed by the body's `model`.
BODY_ROUTED = (
    "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses",
    "/v1/messages", "/v1/messages/count_tokens", "/v1/rerank", "/rerank", "/infill",
    "/completion", "/tokenize", "/detokenize",
)  # fmt: skip


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """OpenAI's error shape."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def send_error(send: Send, exc: GatewayError) -> None:
    """Answer with `exc` in OpenAI's shape, with Retry-After when it has one."""
    headers = [(b"content-type", b"application/json")]
    if exc.retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode()))
    body = json.dumps(error_body(exc.status, exc.code, exc.message)).encode()
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Proxied:
    """One routed path: find the model, lease it, relay; errors in OpenAI's shape."""

    def __init__(self, gateway: Gateway, relay: Relay, by: str, path: str | None = None) -> None:
        self.gateway, self.relay, self.by, self.path = gateway, relay, by, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = now()
        try:
            body = await read_body(receive)
        except ClientGone:
            return
        model, status = "", 0
        tally = begin(scope, t0)
        token = CURRENT.set(tally)

        def first_byte(code: int) -> None:
            nonlocal status
            status = tally.status = code
            tally.ttfb = now()
            self.gateway.metrics.ttfb.labels(model).observe(tally.ttfb - t0)

        async def work() -> None:
            nonlocal model, status
            try:
                model, path = self._target(scope, body)
                async with self.gateway.lease(model) as upstream:
                    model = upstream.model.name
                    await answered(
                        self.gateway,
                        upstream,
                        lambda up: self.relay.relay(
                            scope, send, up, path, up.adapt(body), first_byte, tally
                        ),
                    )
            except GatewayError as exc:
                status = tally.status = exc.status
                await send_error(send, exc)

        try:
            await guard(receive, work())
        finally:
            CURRENT.reset(token)
            end = now()
            label = model if self.gateway.find(model) else "-"
            # 499, as nginx logs it: the client closed the connection first.
            self.gateway.metrics.requests.labels(label, str(status or 499)).inc()
            self.gateway.metrics.latency.labels(label).observe(end - t0)
            tally.model = tally.model or model
            self.gateway.activity.add(tally.record(end))

    def _target(self, scope: Scope, body: bytes) -> tuple[str, str]:
        if self.by == "path":  # /upstream/{model}/{path}
            params = scope["path_params"]
            return params["model"], "/" + params.get("path", "")
        if self.by == "query":
            model = _query(scope).get("model")
            if not model:
                raise Bad("add ?model=NAME to say which model's props you want")
            return model, scope["path"]
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            raise Bad("the request body is not JSON") from None
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or not model:
            raise Bad("the request body has no `model`; GET /v1/models lists them")
        return model, scope["path"]


def _query(scope: Scope) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(scope.get("query_string", b"").decode()))


def model_entry(view: ModelView, created: int) -> dict[str, Any]:
    """One `/v1/models` entry: OpenAI's fields, then llamad's."""
    return {
        "id": view.name,
        "object": "model",
        "created": created,
        "owned_by": f"llamad@{view.host}" if view.host else "llamad",
        "llamad": {
            "state": view.state,
            "loaded": view.loaded,
            "on_demand": view.on_demand,
            "aliases": list(view.aliases),
            "idle_timeout": view.idle_timeout,
            "expires_at": view.expires_at,
            "size_bytes": view.size_bytes,
            "load_progress": view.load_progress,
        },
    }


class KeyCheck:
    """Bearer or x-api-key against the gateway's keys (`keys.py`); /health and the page's
    files stay open. The key found serves the request as `keys.CALLER`."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app, self.gateway = app, gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        keys = self.gateway.settings().keys
        if scope["type"] == "http" and keys and needs_key(scope):
            key = lookup(keys, given(scope))
            if key is None:
                exc = GatewayError("a valid API key is required (Bearer or x-api-key)")
                exc.status, exc.code = 401, "invalid_api_key"
                await send_error(send, exc)
                return
            token = CALLER.set(key)
            try:
                await self.app(scope, receive, send)
            finally:
                CALLER.reset(token)
            return
        await self.app(scope, receive, send)


def build_app(
    gateway: Gateway,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    pool: Pool,
) -> ASGIApp:
    """The gateway's ASGI app: its routes, then `extra_routes` (e.g. an Ollama facade),
    behind the key check. Upstream requests go through `pool`, which the caller owns."""
    relay = Relay(pool)

    async def models(request: Request) -> Response:
        data = [model_entry(v, gateway.created) for v in gateway.models()]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/props", Proxied(gateway, relay, "query"), methods=["GET"]),
        Route("/upstream/{model}/{path:path}", Proxied(gateway, relay, "path")),
    ]
    routes += [Route(p, Proxied(gateway, relay, "body"), methods=["POST"]) for p in BODY_ROUTED]
    return KeyCheck(Starlette(routes=[*routes, *extra_routes]), gateway)
