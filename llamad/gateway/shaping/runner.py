"""Serving a shaped request: its choices sent to llama-server whole (as many at once as
the model has slots), the answer built in the client's shape and written whole or as
its family's stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.types import Send

from llamad.gateway.books.activity import Tally
from llamad.gateway.contract.port import GatewayPort, Upstream
from llamad.gateway.relay.connection import Broken
from llamad.gateway.relay.resend import answered, from_leased
from llamad.gateway.relay.upstream_errors import refit
from llamad.gateway.relay.upstream_pool import Pool, encode
from llamad.gateway.shaping.answers import whole
from llamad.gateway.shaping.counts import usage_of
from llamad.gateway.shaping.plan import Shape
from llamad.gateway.shaping.streams import events
from llamad.supervise.facts import Facts

Outgoing = Callable[[Upstream, str, bytes], bytes]


class Failed(Exception):
    """An upstream error answer, passed on as it came (refitted to the family)."""

    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(status)
        self.status, self.raw = status, raw


async def _one(pool: Pool, upstream: Upstream, path: str, data: bytes) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json"), *encode(upstream.headers)]
    answer = from_leased(
        upstream, await pool.request("POST", upstream.base_url, path, headers, data)
    )
    try:
        raw = await answer.aread()
    except Broken as exc:
        raise Failed(502, json.dumps({"error": {"message": f"broke off: {exc}"}}).encode()) from exc
    finally:
        answer.close()
    if answer.status >= 400:
        raise Failed(answer.status, raw)
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise Failed(502, b'{"error": {"message": "llama-server answered no object"}}')
    return doc


async def _choices(
    gateway: GatewayPort, pool: Pool, upstream: Upstream, shape: Shape, slots: int,
    outgoing: Outgoing,
) -> list[dict[str, Any]]:  # fmt: skip
    room = asyncio.Semaphore(max(1, slots))

    async def run(body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps({**body, "stream": False}, ensure_ascii=False).encode()
        async with room:
            return await answered(
                gateway,
                upstream,
                lambda up: _one(
                    pool, up, shape.upstream_path, outgoing(up, shape.upstream_path, data)
                ),
            )

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
    try:
        answers = await _choices(gateway, pool, upstream, shape, slots, outgoing)
    except Failed as failed:
        status, body = refit(shape.path, failed.status, failed.raw)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        first_byte(status)
        await send({"type": "http.response.body", "body": body})
        return
    if tally is not None:
        tally.usage = usage_of(answers)
    doc = whole(shape, answers, asked)
    kind = b"text/event-stream" if shape.stream else b"application/json"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
    first_byte(200)
    if not shape.stream:
        await send(
            {"type": "http.response.body", "body": json.dumps(doc, ensure_ascii=False).encode()}
        )
        return
    for event in events(shape, doc):
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
