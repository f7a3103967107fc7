"""Running a planned request and answering in Ollama's shape: NDJSON chunks or one object."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import structlog
from starlette.responses import JSONResponse, Response, StreamingResponse

from llamad.gateway.access.call import Call
from llamad.gateway.books.usage import from_fields
from llamad.gateway.ollama.durations import done_fields, rfc3339
from llamad.gateway.ollama.errors import OllamaError
from llamad.gateway.ollama.port import GatewayPort, ModelView
from llamad.gateway.ollama.requests import Plan
from llamad.gateway.ollama.stream import Events, Piece, stream_error
from llamad.gateway.ollama.upstream import Exchange, read_all, sse_events
from llamad.gateway.relay.keepalive import Beat, ndjson_beat
from llamad.upstream.pool import Pool

log = structlog.get_logger("llamad.gateway.ollama")

NDJSON = "application/x-ndjson"

# Renders a piece (and whether it is the last) as one Ollama object, without durations.
Render = Callable[[Piece, bool], dict[str, Any]]


def chat_renderer(model: str) -> Render:
    """Chunks of /api/chat: `message` with content, thinking and tool calls."""

    def render(piece: Piece, done: bool) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": piece.content}
        if piece.thinking:
            message["thinking"] = piece.thinking
        if piece.tool_calls:
            message["tool_calls"] = piece.tool_calls
        out = {"model": model, "created_at": rfc3339(time.time()), "message": message, "done": done}
        if piece.logprobs:
            out["logprobs"] = piece.logprobs
        return out

    return render


def generate_renderer(model: str) -> Render:
    """Chunks of /api/generate: `response` (and `thinking`)."""

    def render(piece: Piece, done: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": model,
            "created_at": rfc3339(time.time()),
            "response": piece.content,
            "done": done,
        }
        if piece.thinking:
            out["thinking"] = piece.thinking
        if piece.logprobs:
            out["logprobs"] = piece.logprobs
        return out

    return render


def keepalive_beat(renderer: Callable[[str], Render]) -> Callable[[Any], Beat | None]:
    """How a route answered by `renderer` keeps a streamed request alive: with an empty
    chunk of its shape (keepalive.py); None when the request (its parsed body) does not
    stream."""

    def beat(body: Any) -> Beat | None:
        if not isinstance(body, dict) or body.get("stream", True) is not True:
            return None
        render = renderer(str(body.get("model") or body.get("name") or ""))
        return ndjson_beat(lambda: _line(render(Piece(), False)))

    return beat


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def _final(render: Render, piece: Piece, events: Events, ex: Exchange) -> dict[str, Any]:
    if (tally := ex.call.tally) is not None:
        tally.usage = from_fields(events.timings, events.usage)
    return render(piece, True) | done_fields(
        reason=events.reason,
        timings=events.timings,
        usage=events.usage,
        total_seconds=ex.elapsed(),
        load_seconds=ex.load_seconds,
    )


async def answer(
    *,
    gateway: GatewayPort,
    pool: Pool,
    leases: AsyncExitStack,
    view: ModelView,
    keep_alive: float | None,
    plan: Plan,
    render: Render,
    stream: bool,
    call: Call,
) -> Response:
    """Lease the model for `call`, send the plan upstream, and answer streamed or whole.

    Errors before the first byte (unknown model, failed load, llama-server refusing the
    request) answer with their status; an error mid-stream becomes a last `{"error"}` line,
    as Ollama does.
    """
    body = plan.body
    if not stream:
        # One upstream document instead of a stream: the readers take both shapes.
        body = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
    ex = Exchange(leases, call)
    await ex.lease(gateway, view, keep_alive)
    reply = await ex.post_stream(pool, plan.path, body)
    events = plan.events()
    if not stream:
        try:
            whole = events.feed(json.loads(await read_all(reply)))
        except ValueError as exc:
            raise OllamaError(502, f"llama-server sent no JSON: {exc}") from exc
        finally:
            await ex.close()
        whole.extend(events.finish())
        return JSONResponse(_final(render, whole, events, ex))

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for event in sse_events(reply):
                if (message := stream_error(event)) is not None:
                    yield _line({"error": message})
                    return
                piece = events.feed(event)
                if piece:
                    yield _line(render(piece, False))
            tail = events.finish()
            if tail:
                yield _line(render(tail, False))
            yield _line(_final(render, Piece(), events, ex))
        finally:
            # Also on client disconnect: closing the upstream stops llama-server generating.
            await ex.close()

    return StreamingResponse(lines(), media_type=NDJSON)


async def load_only(
    gateway: GatewayPort,
    view: ModelView,
    keep_alive: float | None,
    render: Render,
    leases: AsyncExitStack,
    call: Call,
) -> Response:
    """An empty prompt or message list: load the model, or with keep_alive 0 unload it.

    Only on-demand models unload: an always-on instance stays up whatever an app asks.
    """
    if keep_alive == 0 and view.on_demand:
        await gateway.unload(view.name)
        return JSONResponse(render(Piece(), True) | {"done_reason": "unload"})
    if keep_alive == 0:
        log.info("ollama.unload_ignored", model=view.name, reason="always-on instance")
    ex = Exchange(leases, call)
    try:
        await ex.lease(gateway, view, None if keep_alive == 0 else keep_alive)
    finally:
        await ex.close()
    return JSONResponse(render(Piece(), True) | {"done_reason": "load"})
