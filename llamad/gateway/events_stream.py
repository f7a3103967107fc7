"""`GET /v1/activity` (recent requests, newest first) and `GET /v1/events` (SSE).

The event stream sends `state`, `progress`, `load`, `stop` and `request` events, and a
comment every `KEEPALIVE_S` so that a proxy in between does not close a quiet stream. A
reader that falls `bus.BACKLOG` events behind gets a last `dropped` event and is closed.
"""

from __future__ import annotations

import asyncio

from starlette.responses import JSONResponse, Response
from starlette.types import Send

from llamad.common.waits import first_of
from llamad.gateway.access.call import Call, responds
from llamad.gateway.access.client_side import guard
from llamad.gateway.access.table import Need, Route
from llamad.gateway.books.bus import EventBus, Subscriber
from llamad.gateway.core import Gateway
from llamad.listener.departure import departure

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

    async def __call__(self, call: Call) -> None:
        sub = self.bus.subscribe(call.caller.models)  # a limited key: its models' events
        try:
            await guard(self._stream(sub, call.send), departure(call.scope))
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


def activity_routes(gateway: Gateway, stop: asyncio.Event) -> list[Route]:
    """`/v1/activity` and `/v1/events` over `gateway`."""

    async def activity(call: Call) -> Response:
        model = call.query("model") or None
        raw = call.query("limit") or ""
        limit = int(raw) if raw.isascii() and raw.isdigit() else None
        records = gateway.activity.recent(model, min(limit or MAX_LIMIT, MAX_LIMIT))
        # A key limited to some models sees only their requests.
        data = [r.to_dict() for r in records if call.caller.may_use(r.instance or r.model)]
        return JSONResponse({"object": "list", "data": data})

    return [
        Route("/v1/activity", ("GET",), Need.KEY, responds(activity)),
        Route("/v1/events", ("GET",), Need.KEY, Events(gateway.bus, stop), long=True),
    ]
