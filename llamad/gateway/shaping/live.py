"""A streamed chat or text completion that the gateway shapes (`n` > 1, `echo`, a forced
call), passed on as llama-server generates it: each choice its own upstream stream (as
many at once as the model has slots), their chunks interleaved as they come, each with
its choice's index; usage summed at the end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Send

from llamad.gateway.books.activity import Tally, now
from llamad.gateway.contract.families import gateway_shape
from llamad.gateway.contract.port import GatewayPort, Upstream
from llamad.gateway.relay.resend import answered
from llamad.gateway.shaping.answers import new_id
from llamad.gateway.shaping.calls import Failed, Outgoing, broke, opened
from llamad.gateway.shaping.counts import summed, usage_of
from llamad.gateway.shaping.deltas import Choice
from llamad.gateway.shaping.plan import CHAT, COMPLETIONS, Shape
from llamad.upstream.connection import Broken
from llamad.upstream.pool import Pool

_DONE = object()  # a choice's stream ended
_AHEAD = 64  # chunks the choices may run ahead of a slow client


def incremental(shape: Shape) -> bool:
    """Whether `shape`'s stream is passed on as it is generated (chat, completions)."""
    return shape.stream and shape.path in (CHAT, COMPLETIONS)


def _chunk(text: str) -> dict[str, Any]:
    """One event's chunk; Failed for an error event (llama-server's mid-stream error)."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or "error" in doc:
        raise Failed(502, text.encode())
    return doc


def _said(failure: Exception) -> str:
    """What a failure says: an upstream error's own message, when it has one."""
    if not isinstance(failure, Failed):
        return str(failure) or type(failure).__name__
    try:
        return str(json.loads(failure.raw)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return failure.raw.decode("utf-8", "replace")


def _data(doc: Any) -> bytes:
    return b"data: " + json.dumps(doc, ensure_ascii=False).encode() + b"\n\n"


async def stream(
    gateway: GatewayPort, pool: Pool, upstream: Upstream, shape: Shape, *, asked: str,
    slots: int, send: Send, first_byte: Callable[[int], None], outgoing: Outgoing,
    refuse: Callable[[Failed], Awaitable[None]], tally: Tally | None,
    prompt: Callable[[], Awaitable[list[dict[str, Any]] | None]],
) -> None:  # fmt: skip
    """Answer `shape`'s client as its choices are generated (`prompt`: the echoed
    prompt's logprobs entries, asked for once a choice's stream has opened)."""
    room = asyncio.Semaphore(max(1, slots))
    queue: asyncio.Queue[Any] = asyncio.Queue(_AHEAD)
    rid = new_id("chatcmpl-" if shape.path == CHAT else "cmpl-")
    choices = [Choice(shape, i, asked, rid) for i in range(len(shape.bodies))]
    path = shape.upstream_path

    async def run(choice: Choice, body: dict[str, Any]) -> None:
        options = {"include_usage": True}  # the counts, for the activity record
        data = json.dumps({**body, "stream": True, "stream_options": options}).encode()
        try:
            async with room:
                answer = await answered(
                    gateway, upstream, lambda up: opened(pool, up, path, outgoing(up, path, data))
                )
                try:
                    said = await prompt()  # the stream opened: its prompt fits the context
                    async for line in answer.lines():
                        if line.startswith("data: {"):
                            for chunk in choice.chunks(_chunk(line[6:]), said):
                                await queue.put(chunk)
                finally:
                    answer.close()
        except Broken as exc:
            await queue.put(broke(exc))
        except Exception as exc:  # any failure: the reader decides how it is told
            await queue.put(exc)
        await queue.put(_DONE)

    async def begin() -> None:
        kind = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": kind})
        first_byte(200)
        if tally is not None:
            tally.ttft = now()

    started, failure = False, None
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(run(c, b)) for c, b in zip(choices, shape.bodies, strict=True)
            ]
            left = len(tasks)
            while left:
                item = await queue.get()
                if item is _DONE:
                    left -= 1
                elif isinstance(item, Exception):
                    failure = item
                    for task in tasks:
                        task.cancel()
                    break
                else:
                    if not started:
                        started = True
                        await begin()
                    await send(
                        {"type": "http.response.body", "body": _data(item), "more_body": True}
                    )
    except ExceptionGroup as errors:  # the client left mid-send, say: that failure alone
        raise errors.exceptions[0] from None
    if failure is not None and not started:  # nothing sent: an error answer, as whole
        if isinstance(failure, Failed):
            await refuse(failure)
            return
        raise failure
    if not started:
        await begin()
    if tally is not None:
        tally.usage = usage_of([c.end for c in choices])
    if failure is not None:  # the client has chunks: an error event ends its stream
        message = f"model {upstream.name!r} stopped mid-stream: {_said(failure)}"
        error = gateway_shape(shape.path, 502, "upstream_error", message)
        await send({"type": "http.response.body", "body": b"data: " + error + b"\n\n"})
        return
    tail = b"data: [DONE]\n\n"
    if shape.include_usage:
        usage = summed(c.end.get("usage") for c in choices)
        last = {"id": rid, "object": _OBJECTS[shape.path], "model": asked, "choices": []}
        tail = _data({**last, "usage": usage}) + tail
    await send({"type": "http.response.body", "body": tail, "more_body": False})


_OBJECTS = {CHAT: "chat.completion.chunk", COMPLETIONS: "text_completion"}
