"""One Ollama route as the door runs it: answer under the relay's disconnect guard, and
release every lease the answer took around the response itself.

A streamed answer used to release its lease in the body generator, which never runs when
the client leaves while the response start is being written; a client that left while
its model loaded kept its place in the queue. Here the leases live in an exit stack the
route closes whatever happened, and a client that leaves cancels the work at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import structlog
from starlette.responses import Response
from starlette.types import Message, Send

from llamad.gateway.access.call import Call
from llamad.gateway.access.client_side import guard
from llamad.gateway.books.activity import Activity, Tally, now
from llamad.gateway.ollama.errors import OllamaError, error_response
from llamad.gateway.relay.keepalive import Beat, KeepAlive
from llamad.listener.departure import departure

log = structlog.get_logger("llamad.gateway.ollama")

# A route's work: the request as the door decided it, and the stack its leases go on.
Handler = Callable[[Call, AsyncExitStack], Awaitable[Response]]


class Recorded:
    """The books of the Ollama routes that lease: a request that asked for a model (the
    lease, or the door refusing it, named one) is recorded in `activity`."""

    def __init__(self, activity: Activity) -> None:
        self.activity = activity

    def close(self, tally: Tally, model: str, label: str) -> None:
        """The request is over."""
        if tally.model:
            self.activity.add(tally.record(now()))


class Endpoint:
    """`handler` served as a door's route, errors in Ollama's shape; a request with a
    tally (the door began one: its route has books) is closed into `books`. With `beat`,
    a streamed request that waits (on its model's load) gets keep-alives every
    `interval()` seconds (keepalive.py): `beat` reads the body and says how, or None for
    an answer that does not stream."""

    def __init__(
        self,
        handler: Handler,
        books: Recorded | None = None,
        beat: Callable[[Any], Beat | None] | None = None,
        interval: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.handler = handler
        self.books = books
        self.beat = beat
        self.interval = interval

    async def __call__(self, call: Call) -> None:
        keep = KeepAlive(call.send, self.interval())
        if self.beat is not None:
            beat = self.beat
            keep.arm(lambda: beat(call.doc))
        try:
            async with AsyncExitStack() as leases:
                answer = self._answer(call, leases, keep)
                await guard(answer, departure(call.scope))
        finally:
            if call.tally is not None and self.books is not None:
                self.books.close(call.tally, call.model, "")
            await keep.stop()  # last: a shutdown's cancel here skips no bookkeeping

    async def _answer(self, call: Call, leases: AsyncExitStack, keep: KeepAlive) -> None:
        try:
            response = await self.handler(call, leases)
        except OllamaError as exc:
            response = error_response(exc.status, exc.message, exc.retry_after)
        except RecursionError:
            # Nested deeper than our JSON handling goes: the client's doing, not a bug.
            response = error_response(400, "the request body is nested too deeply")
        except Exception as exc:
            path, method = call.path, call.scope["method"]
            error = type(exc).__name__  # one traceback per kind per interval (logs.py)
            log.exception("ollama.request_failed", method=method, path=path, error=error)
            response = error_response(500, "internal error in llamad's Ollama API; see its log")
        await keep.stop()
        out = keep.out if call.tally is None else watched(keep.out, call.tally)
        await response(call.scope, _nothing_more, out)


def watched(send: Send, tally: Tally) -> Send:
    """`send`, noting the response's status, its start and its body's first bytes."""

    async def send_and_note(message: Message) -> None:
        if message["type"] == "http.response.start":
            tally.status, tally.ttfb = message["status"], now()
        elif tally.ttft is None and message.get("body"):
            tally.ttft = now()
        await send(message)

    return send_and_note


async def _nothing_more() -> Message:
    """A response's receive: the door has read the body, and the guard watches for the
    client leaving (and cancels the response when it does)."""
    await asyncio.Future()  # never
    raise AssertionError("unreachable")
