"""Serving a shaped request: a streamed chat or text completion passed on as it is
generated (live.py); anything else from its choices' whole answers (as many at once as
the model has slots), built in the client's shape and written whole or as its family's
stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.types import Send

from llamad.gateway.books.activity import Tally, now
from llamad.gateway.contract.port import GatewayPort, Upstream
from llamad.gateway.relay.resend import answered
from llamad.gateway.relay.upstream_errors import refit
from llamad.gateway.shaping import live
from llamad.gateway.shaping.answers import whole
from llamad.gateway.shaping.calls import Budget, Failed, Outgoing, one
from llamad.gateway.shaping.counts import usage_of
from llamad.gateway.shaping.plan import Shape
from llamad.gateway.shaping.prompt_tokens import TOKENIZE, entries, tokenize_body, with_prompt
from llamad.gateway.shaping.streams import events
from llamad.supervise.facts import Facts
from llamad.upstream.pool import Pool


async def _whole(
    gateway: GatewayPort, pool: Pool, upstream: Upstream, path: str, body: dict[str, Any],
    outgoing: Outgoing, budget: Budget,
) -> dict[str, Any]:  # fmt: skip
    data = json.dumps(body, ensure_ascii=False).encode()
    return await answered(
        gateway, upstream, lambda up: one(pool, up, path, outgoing(up, path, data), budget)
    )


async def _choices(
    gateway: GatewayPort, pool: Pool, upstream: Upstream, shape: Shape, slots: int,
    outgoing: Outgoing, budget: Budget,
) -> list[dict[str, Any]]:  # fmt: skip
    room = asyncio.Semaphore(max(1, slots))

    async def run(body: dict[str, Any]) -> dict[str, Any]:
        async with room:
            path, whole_body = shape.upstream_path, {**body, "stream": False}
            return await _whole(gateway, pool, upstream, path, whole_body, outgoing, budget)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(body)) for body in shape.bodies]
    except ExceptionGroup as errors:  # the first failure speaks for the request
        raise errors.exceptions[0] from None
    return [t.result() for t in tasks]


def slots(facts: Facts | None) -> int:
    """How many choices go to the model at once: its slots (`n_parallel`), 1 unknown."""
    value = dict(facts.spec.settings).get("LLAMA_ARG_N_PARALLEL", "") if facts else ""
    return int(value) if value.isdigit() and int(value) > 0 else 1


async def serve(
    gateway: GatewayPort,
    pool: Pool,
    upstream: Upstream,
    shape: Shape,
    *,
    asked: str,
    slots: int,
    send: Send,
    first_byte: Callable[[int], None],
    outgoing: Outgoing,
    tally: Tally | None = None,
) -> None:
    """Answer `shape`'s client from llama-server's answers to its choices."""

    async def refuse(failed: Failed) -> None:
        status, body = refit(shape.path, failed.status, failed.raw)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        first_byte(status)
        await send({"type": "http.response.body", "body": body})

    lock, tokens, budget = asyncio.Lock(), list[list[dict[str, Any]]](), Budget()

    async def echoed() -> list[dict[str, Any]] | None:
        # Asked only once llama-server took the prompt, which then fits its context:
        # `/tokenize` takes any length, and a body's worth of tokens is gigabytes here.
        if not shape.prompt_logprobs or shape.echo is None:
            return None
        async with lock:
            if not tokens:
                body = tokenize_body(shape.echo)
                said = await _whole(gateway, pool, upstream, TOKENIZE, body, outgoing, budget)
                tokens.append(entries(said))
        return tokens[0]

    try:
        if live.incremental(shape):
            await live.stream(
                gateway, pool, upstream, shape, asked=asked, slots=slots, send=send,
                first_byte=first_byte, outgoing=outgoing, refuse=refuse, tally=tally,
                prompt=echoed,
            )  # fmt: skip
            return
        answers = await _choices(gateway, pool, upstream, shape, slots, outgoing, budget)
        before = budget.left
        prompt = await echoed()
        budget.take((len(answers) - 1) * (before - budget.left))  # a copy in every choice
    except Failed as failed:
        await refuse(failed)
        return
    if tally is not None:
        tally.usage = usage_of(answers)
    doc = whole(shape, answers, asked)
    if prompt is not None:
        for choice in doc["choices"]:
            choice["logprobs"] = with_prompt(choice.get("logprobs"), prompt)
    kind = b"text/event-stream" if shape.stream else b"application/json"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
    first_byte(200)
    if tally is not None:
        tally.ttft = now()
    if not shape.stream:
        await send(
            {"type": "http.response.body", "body": json.dumps(doc, ensure_ascii=False).encode()}
        )
        return
    for event in events(shape, doc):
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
