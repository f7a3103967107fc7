"""The gateway's HTTP routes: OpenAI-compatible paths routed by model, and its own.

Routes are raw ASGI (no Request/Response objects on the hot path); other route sets,
such as an Ollama facade, are mounted beside them with `build_app(..., extra_routes)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.gateway import listing
from llamad.gateway.activity import CURRENT, begin
from llamad.gateway.client_side import ClientGone, guard, read_body
from llamad.gateway.core import Gateway
from llamad.gateway.families import gateway_shape
from llamad.gateway.keepalive import KeepAlive, sse_beat
from llamad.gateway.keycheck import KeyCheck
from llamad.gateway.keyguard import KeyGuard
from llamad.gateway.naming import renamer
from llamad.gateway.pool import Pool
from llamad.gateway.port import GatewayError, UnknownModel
from llamad.gateway.proxy import Bad, Relay, now
from llamad.gateway.replicas.hints import HINTS, hints_of
from llamad.gateway.resend import answered
from llamad.gateway.routed import BODY_ROUTED, Books, outgoing, send_error
from llamad.gateway.shapes import valid_text
from llamad.listener.departure import departure


class Proxied:
    """One routed path: find the model, lease it, relay; errors in OpenAI's shape."""

    def __init__(self, gateway: Gateway, relay: Relay, by: str, path: str | None = None) -> None:
        self.gateway, self.relay, self.by, self.path = gateway, relay, by, path
        self.books = Books(gateway)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = now()
        try:
            body = await read_body(receive)
        except ClientGone:
            return
        # `label`: the name the lease resolved, for the metrics ("" until one has).
        model, label = "", ""
        tally = begin(scope, t0)
        token = CURRENT.set(tally)

        def first_byte(code: int) -> None:
            self.books.first_byte(tally, model, code)

        keep = KeepAlive(send, self.gateway.settings().keepalive_interval)

        async def work() -> None:
            nonlocal model, label
            try:
                model, path, doc = self._target(scope, body)
                asked = model
                HINTS.set(hints_of(scope["headers"], doc))  # this task's own context
                if isinstance(doc, dict) and doc.get("stream") is True:
                    keep.arm(lambda: sse_beat(scope["path"]))
                async with self.gateway.lease(model) as upstream:
                    await keep.stop()
                    out = keep.out
                    model = label = upstream.name
                    await answered(
                        self.gateway,
                        upstream,
                        lambda up: self.relay.relay(
                            scope,
                            out,
                            up,
                            path,
                            outgoing(up, path, body),
                            first_byte,
                            renamer(up, asked, self._document(scope)),
                            tally,
                        ),
                    )
            except GatewayError as exc:
                tally.status = exc.status
                await keep.stop()
                await send_error(keep.send, exc, scope["path"])

        try:
            await guard(receive, work(), departure(scope))
        finally:
            CURRENT.reset(token)
            self.books.close(tally, model, label)
            await keep.stop()  # last: a shutdown's cancel here skips no bookkeeping

    def _document(self, scope: Scope) -> bool:
        # A GET passed through answers one of llama-server's own documents (props, slots).
        return self.by != "body" and scope["method"] == "GET"

    def _target(self, scope: Scope, body: bytes) -> tuple[str, str, object]:
        """The model, the upstream path and the parsed body (None when not routed by it)."""
        if self.by == "path":  # /upstream/{model}/{path}
            params = scope["path_params"]
            return params["model"], "/" + params.get("path", ""), None
        if self.by == "query":
            model = _query(scope).get("model")
            if not model:
                raise Bad("add ?model=NAME to say which model's props you want")
            return model, scope["path"], None
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            raise Bad("the request body is not JSON") from None
        except RecursionError:
            raise Bad("the request body is nested too deeply") from None
        if not isinstance(doc, dict):
            doc = {}
        model = doc.get("model")
        if not isinstance(model, str) or not model:
            raise Bad("the request body has no `model`; GET /v1/models lists them")
        if not valid_text(model):
            raise Bad("`model` is not valid Unicode (a lone surrogate)")
        return model, scope["path"], doc


def _query(scope: Scope) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(scope.get("query_string", b"").decode()))


def build_app(
    gateway: Gateway,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    pool: Pool,
    guard: KeyGuard | None = None,
) -> ASGIApp:
    """The gateway's ASGI app: its routes, then `extra_routes` (e.g. an Ollama facade),
    behind the key check (wrong keys counted by `guard`, shared with the listener's lane).
    Upstream requests go through `pool`, which the caller owns."""
    relay = Relay(pool)

    async def models(request: Request) -> Response:
        aliases = gateway.settings().list_aliases
        return JSONResponse(listing.models(gateway, gateway.created, aliases))

    async def model(request: Request) -> Response:
        name = request.path_params["model"]
        found = listing.model(gateway, gateway.created, name)
        if found is None:
            known = [v.name for v in gateway.models()]
            raise HTTPException(404, UnknownModel(name, known).message)
        return JSONResponse(found)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/props", Proxied(gateway, relay, "query"), methods=["GET"]),
        Route("/upstream/{model}/{path:path}", Proxied(gateway, relay, "path")),
    ]
    by_body = Proxied(gateway, relay, "body")
    routes += [Route(p, by_body, methods=["POST"]) for p in BODY_ROUTED]
    handlers = {HTTPException: not_found}
    app = Starlette(routes=[*routes, *extra_routes], exception_handlers=handlers)
    return KeyCheck(Posts(app, frozenset(BODY_ROUTED), by_body), gateway, guard)


class Posts:
    """A POST to a body-routed path goes straight to its handler, past Starlette's
    routing and middleware (route matching one by one, two exception layers, wrapped
    sends); everything else goes through `app`, which routes that POST the same way."""

    def __init__(self, app: ASGIApp, paths: frozenset[str], handler: ASGIApp) -> None:
        self.app, self.paths, self.handler = app, paths, handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            await self.handler(scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def not_found(request: Request, exc: Exception) -> Response:
    """An unknown route, a wrong method or an unknown model, in the path's family's shape."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
    if request.url.path.startswith("/v1/models/"):
        code = "model_not_found"
    body = gateway_shape(request.url.path, exc.status_code, code, exc.detail)
    return Response(body, exc.status_code, exc.headers, media_type="application/json")
