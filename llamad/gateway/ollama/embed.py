"""/api/embed and the legacy /api/embeddings, through llama-server's /v1/embeddings."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.responses import JSONResponse, Response

from llamad.gateway.access.call import Call
from llamad.gateway.ollama.durations import done_fields, parse_keep_alive
from llamad.gateway.ollama.errors import OllamaError, field
from llamad.gateway.ollama.port import GatewayPort, ModelView
from llamad.gateway.ollama.upstream import Exchange, read_all
from llamad.upstream.pool import Pool


async def embeddings(
    gateway: GatewayPort,
    pool: Pool,
    view: ModelView,
    keep_alive: float | None,
    inputs: list[str],
    extra: dict[str, Any],
    leases: AsyncExitStack,
    call: Call,
) -> tuple[list[list[float]], int, Exchange]:
    """The embedding of each input, the prompt token count, and the finished exchange."""
    ex = Exchange(leases, call)
    try:
        await ex.lease(gateway, view, keep_alive)
        answer = await ex.post_stream(
            pool, "/v1/embeddings", {"model": view.name, "input": inputs, **extra}
        )
        raw = await read_all(answer)
    finally:
        await ex.close()
    try:
        doc = json.loads(raw)
        rows = sorted(doc["data"], key=lambda row: row.get("index", 0))
        vectors = [list(row["embedding"]) for row in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise OllamaError(502, f"llama-server sent no embeddings: {raw[:200]!r}") from exc
    tokens = int((doc.get("usage") or {}).get("prompt_tokens", 0))
    return vectors, tokens, ex


def embed_inputs(value: object) -> list[str]:
    """`input` of /api/embed: a string or a list of strings."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise OllamaError(400, "'input' must be a string or a list of strings")


def dimensions(value: object) -> dict[str, Any]:
    """`dimensions` passed on when given (llama-server may refuse it)."""
    if value is None:
        return {}
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return {"dimensions": value}
    raise OllamaError(400, "'dimensions' must be a positive integer")


async def embed_answer(
    gateway: GatewayPort,
    pool: Pool,
    resolve: Callable[[str], ModelView],
    call: Call,
    leases: AsyncExitStack,
) -> Response:
    """POST /api/embed {input: str | [str]} -> {embeddings: [[...]]}."""
    body, name = call.doc, call.model
    inputs = embed_inputs(body.get("input", ""))
    extra = dimensions(body.get("dimensions"))
    view = resolve(name)
    keep_alive = parse_keep_alive(body.get("keep_alive"))
    asked = await embeddings(gateway, pool, view, keep_alive, inputs, extra, leases, call)
    vectors, tokens, ex = asked
    timing = done_fields(
        reason="stop",
        timings=None,
        usage={"prompt_tokens": tokens},
        total_seconds=ex.elapsed(),
        load_seconds=ex.load_seconds,
    )
    out: dict[str, Any] = {"model": name, "embeddings": vectors}
    for key in ("total_duration", "load_duration", "prompt_eval_count"):
        out[key] = timing[key]
    return JSONResponse(out)


async def legacy_answer(
    gateway: GatewayPort,
    pool: Pool,
    resolve: Callable[[str], ModelView],
    call: Call,
    leases: AsyncExitStack,
) -> Response:
    """POST /api/embeddings {prompt} -> {embedding: [...]} (Ollama's older route)."""
    body = call.doc
    view = resolve(call.model)
    prompt = field(body, "prompt", str, "")
    keep_alive = parse_keep_alive(body.get("keep_alive"))
    if not prompt:
        return JSONResponse({"embedding": []})
    vectors, _, _ = await embeddings(gateway, pool, view, keep_alive, [prompt], {}, leases, call)
    return JSONResponse({"embedding": vectors[0]})
