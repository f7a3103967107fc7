"""The requests a shaped answer is made from, sent to llama-server: whole (one JSON
answer) or opened as a stream, an error answer raised as `Failed`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from llamad.gateway.access.limits import MAX_HELD
from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.resend import from_leased
from llamad.upstream.answer import Answer
from llamad.upstream.connection import Broken
from llamad.upstream.pool import Pool, encode

Outgoing = Callable[[Upstream, str, bytes], bytes]


class Failed(Exception):
    """An upstream error answer, passed on as it came (refitted to the family)."""

    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(status)
        self.status, self.raw = status, raw


class Budget:
    """What is left of MAX_HELD for one shaped request's answers; Failed (a 400) once
    they pass it, and the choices still running are cancelled."""

    def __init__(self, left: int = MAX_HELD) -> None:
        self.left = left

    def take(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            message = (
                f"the answer is over the {MAX_HELD >> 20} MiB the gateway holds to build it "
                "(choices x tokens x logprobs): ask for less, or for a stream"
            )
            error = {"code": 400, "message": message, "type": "invalid_request_error"}
            raise Failed(400, json.dumps({"error": error}).encode())


def broke(exc: Exception) -> Failed:
    """A 502 for an answer that broke off before its end."""
    return Failed(502, json.dumps({"error": {"message": f"broke off: {exc}"}}).encode())


async def opened(pool: Pool, upstream: Upstream, path: str, data: bytes) -> Answer:
    """The answer to a POST of `data`, its head in; Failed (read and closed) when it is
    an error."""
    headers = [(b"content-type", b"application/json"), *encode(upstream.headers)]
    answer = from_leased(
        upstream, await pool.request("POST", upstream.base_url, path, headers, data)
    )
    if answer.status < 400:
        return answer
    raise Failed(answer.status, await _body(answer))


async def _body(answer: Answer, budget: Budget | None = None) -> bytes:
    """The whole body, the answer closed; Failed when it broke off or passed `budget`."""
    chunks = []
    try:
        async for chunk in answer.chunks():
            if budget is not None:
                budget.take(len(chunk))
            chunks.append(chunk)
        return b"".join(chunks)
    except Broken as exc:
        raise broke(exc) from exc
    finally:
        answer.close()


async def one(
    pool: Pool, upstream: Upstream, path: str, data: bytes, budget: Budget
) -> dict[str, Any]:
    """The whole JSON answer to a POST of `data`, its bytes taken from `budget`."""
    doc = json.loads(await _body(await opened(pool, upstream, path, data), budget))
    if not isinstance(doc, dict):
        raise Failed(502, b'{"error": {"message": "llama-server answered no object"}}')
    return doc
