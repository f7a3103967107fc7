"""`GET /v1/activity` (recent requests, newest first) and `GET /v1/events` (SSE).

The event stream sends `state`, `progress`, `load`, `stop` and `request` events, and a
comment every `KEEPALIVE_S` so that a proxy in between does not close a quiet stream. A
reader that falls `bus.BACKLOG` events behind gets a last `dropped` event and is closed.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from llamad.common.waits import first_of
from llamad.gateway.bus import EventBus, Subscriber
from llamad.gateway.client_side import ClientGone, guard, read_body
from llamad.gateway.core import Gateway
from llamad.gateway.keys import CALLER, may_use

KEEPALIVE_S = 15.0
MAX_LIMIT = 10_000
_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Events:
    """The SSE endpoint over `bus`; every stream ends when `stop` is set."""

    def __init__(self, bus: EventBus, stop: asyncio.Event) -> None:
        self.bus, self.stop = bus, stop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await read_body(receive)
        except ClientGone:
            return
        key = CALLER.get()
        sub = self.bus.subscribe(None if key is None else key.models)
        try:
            await guard(receive, self._stream(sub, send))
        finally:
            self.bus.unsubscribe(sub)

    async def _stream(self, sub: Subscriber, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        await send({"type": "http.response.body", "body": b": llamad\n\n", "more_body": True})
        while not (sub.closed or self.stop.is_set()):
            await first_of(sub.wait(KEEPALIVE_S), self.stop.wait())
            chunk = b"".join(sub.pending) if sub.pending else b": keep-alive\n\n"
            sub.pending.clear()
            if sub.dropped:
                chunk += b'event: dropped\ndata: {"type": "dropped"}\n\n'
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if sub.dropped:
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def activity_routes(gateway: Gateway, stop: asyncio.Event) -> list[BaseRoute]:
    """`/v1/activity` and `/v1/events` over `gateway`."""

    async def activity(request: Request) -> Response:
        model = request.query_params.get("model") or None
        raw = request.query_params.get("limit", "")
        limit = int(raw) if raw.isascii() and raw.isdigit() else None
        records = gateway.activity.recent(model, min(limit or MAX_LIMIT, MAX_LIMIT))
        # A key limited to some models sees only their requests.
        data = [r.to_dict() for r in records if may_use(r.instance or r.model)]
        return JSONResponse({"object": "list", "data": data})

    return [
        Route("/v1/activity", activity, methods=["GET"]),
        Route("/v1/events", Events(gateway.bus, stop), methods=["GET"]),
    ]
