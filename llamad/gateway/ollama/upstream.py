"""Leasing a model from the gateway and streaming one request to its llama-server.

An `Exchange` holds the lease and the open upstream answer together, so a streamed
answer keeps the model counted in flight until its last byte (or the client's disconnect)
and then releases both, in that order. Requests go through the gateway's pool, as the
relay's do.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from llamad.gateway.access.call import Call
from llamad.gateway.contract.port import GatewayError, UpstreamError
from llamad.gateway.ollama.errors import OllamaError, from_gateway, not_found
from llamad.gateway.ollama.port import GatewayPort, ModelView, Upstream
from llamad.gateway.relay.prompt_defaults import apply
from llamad.gateway.relay.resend import answered, from_leased
from llamad.gateway.relay.upstream_errors import honest_status, parse
from llamad.upstream.answer import Answer
from llamad.upstream.connection import Broken
from llamad.upstream.pool import Pool, encode


def resolve(gateway: GatewayPort, name: str) -> ModelView:
    """The model for an Ollama name (`gateway.find`: `:latest` or not), or a 404."""
    view = gateway.find(name)
    if view is None:
        raise not_found(name)
    return view


@dataclass
class Exchange:
    """One leased request: when it began, how long the load took, and what to close.

    `leases` is the route's: it closes the exchange (answer, then lease) whatever
    happens to the response, even when a streamed body never starts. `call` is the
    request as the door decided it, passed to the lease (its hop, its record)."""

    leases: AsyncExitStack
    call: Call
    started: float = field(default_factory=time.monotonic)
    load_seconds: float = 0.0
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    upstream: Upstream | None = None
    gateway: GatewayPort | None = None

    def __post_init__(self) -> None:
        self.leases.push_async_callback(self.close)

    async def lease(
        self, gateway: GatewayPort, view: ModelView, keep_alive: float | None
    ) -> Upstream:
        """Lease the model (loading it if needed); gateway refusals become OllamaErrors."""
        began = time.monotonic()
        try:
            self.upstream = await self.stack.enter_async_context(
                gateway.lease(view.name, keep_alive=keep_alive, asking=self.call)
            )
        except GatewayError as exc:
            raise from_gateway(exc) from exc
        self.gateway = gateway
        self.load_seconds = time.monotonic() - began
        return self.upstream

    async def post_stream(self, pool: Pool, path: str, body: dict[str, Any]) -> Answer:
        """POST `body` to the leased llama-server and return its open answer.

        No answer, or an error status with its message, becomes an OllamaError.
        """
        assert self.upstream is not None, "lease() first"
        assert self.gateway is not None
        if self.upstream.prompt is not None:
            apply(self.upstream.prompt, path, body)
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

        async def attempt(upstream: Upstream) -> Answer:
            headers = [(b"content-type", b"application/json"), *encode(upstream.headers)]
            answer = await pool.request("POST", upstream.base_url, path, headers, data)
            return from_leased(upstream, answer)

        try:
            answer = await answered(self.gateway, self.upstream, attempt)
        except UpstreamError as exc:
            raise OllamaError(502, f"llama-server did not answer: {exc.message}") from exc
        except GatewayError as exc:  # its restart did not come back in time
            raise from_gateway(exc) from exc
        self.stack.callback(answer.close)
        if answer.status >= 400:
            message, kind = parse(await read_all(answer))
            raise OllamaError(honest_status(answer.status, message, kind), message)
        return answer

    def elapsed(self) -> float:
        """Seconds since the request began."""
        return time.monotonic() - self.started

    async def close(self) -> None:
        """Close the upstream response, then release the lease."""
        await self.stack.aclose()


async def read_all(answer: Answer) -> bytes:
    """The whole answer; one that breaks off is a 502."""
    try:
        return await answer.aread()
    except Broken as exc:
        raise OllamaError(502, f"llama-server broke off: {exc}") from exc


async def sse_events(answer: Answer) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream, up to `[DONE]`."""
    async for line in answer.lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event
