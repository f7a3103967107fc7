"""One Ollama route as an ASGI app: read the body, answer under the relay's disconnect
guard, and release every lease the answer took around the response itself.

A streamed answer used to release its lease in the body generator, which never runs when
the client leaves while the response start is being written; a client that left while
its model loaded kept its place in the queue. Here the leases live in an exit stack the
route closes whatever happened, and a client that leaves cancels the work at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from llamad.gateway.activity import CURRENT, Activity, Tally, begin
from llamad.gateway.client_side import ClientGone, guard, read_body
from llamad.gateway.keepalive import Beat, KeepAlive
from llamad.gateway.ollama.errors import OllamaError, error_response
from llamad.gateway.proxy import now
from llamad.listener.departure import departure

log = structlog.get_logger("llamad.gateway.ollama")

# A route's work: the request (its body already read) and the stack its leases go on.
Handler = Callable[[Request, AsyncExitStack], Awaitable[Response]]


class Endpoint:
    """`handler` served as ASGI, errors in Ollama's shape; a request that asked for a
    model is recorded in `activity`. With `beat`, a streamed request that waits (on its
    model's load) gets keep-alives every `interval()` seconds (keepalive.py): `beat` reads
    the body and says how, or None for an answer that does not stream."""

    def __init__(
        self,
        handler: Handler,
        activity: Activity | None = None,
        beat: Callable[[bytes], Beat | None] | None = None,
        interval: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.handler = handler
        self.activity = activity
        self.beat = beat
        self.interval = interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = now()
        try:
            body = await read_body(receive)
        except ClientGone:
            return
        # The guard owns the client's receive from here on: what the request and the
        # response see is the body, then nothing until they are done.
        request = Request(scope, _replay(body))
        tally = begin(scope, t0)
        token = CURRENT.set(tally)
        keep = KeepAlive(send, self.interval())
        if self.beat is not None:
            beat = self.beat
            keep.arm(lambda: beat(body))
        try:
            async with AsyncExitStack() as leases:
                answer = self._answer(request, leases, keep, tally)
                await guard(receive, answer, departure(scope))
        finally:
            CURRENT.reset(token)
            if self.activity is not None and tally.model:
                self.activity.add(tally.record(now()))
            await keep.stop()  # last: a shutdown's cancel here skips no bookkeeping

    async def _answer(
        self, request: Request, leases: AsyncExitStack, keep: KeepAlive, tally: Tally
    ) -> None:
        try:
            response = await self.handler(request, leases)
        except OllamaError as exc:
            response = error_response(exc.status, exc.message, exc.retry_after)
        except RecursionError:
            # Nested deeper than our JSON handling goes: the client's doing, not a bug.
            response = error_response(400, "the request body is nested too deeply")
        except Exception as exc:
            path = request.url.path
            error = type(exc).__name__  # one traceback per kind per interval (logs.py)
            log.exception("ollama.request_failed", method=request.method, path=path, error=error)
            response = error_response(500, "internal error in llamad's Ollama API; see its log")
        await keep.stop()
        await response(request.scope, _replay(b""), watched(keep.out, tally))


def watched(send: Send, tally: Tally) -> Send:
    """`send`, noting the response's status, its start and its body's first bytes."""

    async def send_and_note(message: Message) -> None:
        if message["type"] == "http.response.start":
            tally.status, tally.ttfb = message["status"], now()
        elif tally.ttft is None and message.get("body"):
            tally.ttft = now()
        await send(message)

    return send_and_note


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Future()  # never: the guard sees the disconnect and cancels us
        raise AssertionError("unreachable")

    return receive
