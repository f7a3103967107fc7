"""The gateway's HTTP routes: OpenAI-compatible paths routed by model, and its own.

Every route is in the door's table (`access/`): the door decides each request and hands
the route a `Call`. Relayed routes write ASGI messages themselves (no Request/Response
objects on the hot path); other route sets, such as an Ollama facade, join the table
with `build_app(..., extra_routes)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from llamad.common.readiness import Readiness
from llamad.gateway.access.call import Call, responds
from llamad.gateway.access.client_side import guard
from llamad.gateway.access.door import Door
from llamad.gateway.access.keyguard import KeyGuard
from llamad.gateway.access.limits import GatewayLimits
from llamad.gateway.access.scope import visible
from llamad.gateway.access.table import Body, Need, Route, Table
from llamad.gateway.contract.families import gateway_shape
from llamad.gateway.contract.port import GatewayError, UnknownModel
from llamad.gateway.core import Gateway
from llamad.gateway.models import listing
from llamad.gateway.relay.keepalive import KeepAlive, sse_beat
from llamad.gateway.relay.naming import renamer
from llamad.gateway.relay.proxy import Relay
from llamad.gateway.relay.resend import answered
from llamad.gateway.routed import BODY_ROUTED, Books, outgoing, send_error
from llamad.gateway.shaping import runner
from llamad.gateway.shaping.plan import shape_of
from llamad.listener.departure import departure
from llamad.listener.limits import Refused
from llamad.upstream.pool import Pool

# The methods that change a llama-server's state (a GET of its slots only reads them).
_CHANGES = ("POST", "PUT", "PATCH", "DELETE")


class Proxied:
    """One routed path: lease the model the door found, relay; errors in the family's
    shape (OpenAI's, or Anthropic's under /v1/messages)."""

    def __init__(self, gateway: Gateway, relay: Relay, books: Books, by: str) -> None:
        self.gateway, self.relay, self.books, self.by = gateway, relay, books, by

    async def __call__(self, call: Call) -> None:
        scope, tally = call.scope, call.tally
        assert tally is not None, "a route with books: the door began its tally"
        # `label`: the name the lease resolved, for the metrics ("" until one has).
        model, label = call.model, ""
        # By path (/upstream/{model}/...): the rest of the path goes upstream.
        path = "/" + scope["path"].split("/", 3)[3] if self.by == "path" else scope["path"]

        def first_byte(code: int) -> None:
            self.books.first_byte(tally, model, code)

        keep = KeepAlive(call.send, self.gateway.settings().keepalive_interval)

        async def work() -> None:
            nonlocal model, label
            try:
                asked, doc = model, call.doc
                if isinstance(doc, dict) and doc.get("stream") is True:
                    keep.arm(lambda: sse_beat(scope["path"]))
                shape = shape_of(path, doc) if self.by == "body" else None
                async with self.gateway.lease(model, asking=call) as upstream:
                    await keep.stop()
                    out = keep.out
                    model = label = upstream.name
                    if shape is not None:  # what llama-server leaves out (shaping/)
                        slots = runner.slots(self.gateway.router.find(upstream.name))
                        await runner.serve(
                            self.gateway, self.relay.pool, upstream, shape, asked=asked,
                            slots=slots, send=out, first_byte=first_byte, outgoing=outgoing,
                            tally=tally,
                        )  # fmt: skip
                        return
                    await answered(
                        self.gateway,
                        upstream,
                        lambda up: self.relay.relay(
                            scope,
                            out,
                            up,
                            path,
                            outgoing(up, path, call.body),
                            first_byte,
                            renamer(up, asked, self._document(scope)),
                            tally,
                        ),
                    )
            except GatewayError as exc:
                if isinstance(exc, UnknownModel) and call.caller.scoped:
                    # Gone since the door looked: still only the names this key may use.
                    exc = UnknownModel(exc.name, visible(self.gateway, call.caller))
                tally.status = exc.status
                await keep.stop()
                await send_error(keep.send, exc, scope["path"])

        try:
            await guard(work(), departure(scope))
        finally:
            self.books.close(tally, model, label)
            await keep.stop()  # last: a shutdown's cancel here skips no bookkeeping

    def _document(self, scope: Scope) -> bool:
        # A GET passed through answers one of llama-server's own documents (props, slots).
        return self.by != "body" and scope["method"] == "GET"


def build_app(
    gateway: Gateway,
    extra_routes: Sequence[Route] = (),
    *,
    pool: Pool,
    guard: KeyGuard | None = None,
    limits: GatewayLimits | None = None,
    refused: Refused | None = None,
    readiness: Readiness | None = None,
) -> Door:
    """The gateway's ASGI app: the door, over its routes and `extra_routes` (the Ollama
    facade, the page, activity); wrong keys are counted by `guard`, bodies held to
    `limits` (`[gateway] max_body` alone without), refusals told to `refused`. Upstream
    requests go through `pool`, which the caller owns. `/ready` tells `readiness` (ready
    without one)."""
    relay, books = Relay(pool), Books(gateway)
    readiness = readiness or Readiness(started=True)

    async def models(call: Call) -> Response:
        aliases = gateway.settings().list_aliases
        return JSONResponse(listing.models(gateway, gateway.created, aliases, call.caller))

    async def model(call: Call) -> Response:
        found = listing.model(gateway, gateway.created, call.model)
        if found is None:
            message = UnknownModel(call.model, visible(gateway, call.caller)).message
            body = gateway_shape(call.path, 404, "model_not_found", message)
            return Response(body, 404, media_type="application/json")
        return JSONResponse(found)

    async def health(call: Call) -> Response:
        return JSONResponse({"status": "ok"})

    async def ready(call: Call) -> Response:
        # Liveness (`/health`) stays ok while stopping: only the balancer should let go.
        state = readiness.state
        return JSONResponse({"status": state}, 200 if state == "ready" else 503)

    by_body = Proxied(gateway, relay, books, "body")
    by_path = Proxied(gateway, relay, books, "path")
    routes = [
        Route("/health", ("GET",), Need.OPEN, responds(health)),
        Route("/ready", ("GET",), Need.OPEN, responds(ready)),
        Route("/v1/models", ("GET",), Need.KEY, responds(models)),
        Route("/v1/models/{model:path}", ("GET",), Need.MODEL, responds(model), model="model"),
        Route(
            "/props", ("GET",), Need.MODEL, Proxied(gateway, relay, books, "query"),
            model="query", books=books,
        ),
        # A model's slots and adapters are every caller's: saving over, restoring,
        # erasing or rescaling them is management, never a limited key's.
        *(
            Route(
                f"/upstream/{{model}}/{part}{{rest:path}}", _CHANGES, Need.MANAGE, by_path,
                Body.RAW, "model", books,
            )
            for part in ("slots", "lora-adapters")
        ),
        Route("/upstream/{model}/{path:path}", None, Need.MODEL, by_path, Body.RAW, "model", books),
        *(
            Route(p, ("POST",), Need.MODEL, by_body, Body.JSON, "body", books)
            for p in BODY_ROUTED
        ),
    ]  # fmt: skip
    limits = limits or GatewayLimits(gateway.settings, lambda: {})
    table = Table([*routes, *extra_routes])
    return Door(table, gateway, gateway.settings, limits, guard, refused)
