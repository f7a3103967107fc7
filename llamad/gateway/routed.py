"""What every relayed request shares (`app.Proxied`): the body-routed paths, the body
as it goes upstream, the error answer, and the books kept of it.
"""

from __future__ import annotations

import math

from starlette.types import Send

from llamad.gateway.books.activity import Tally, now
from llamad.gateway.contract.families import gateway_shape
from llamad.gateway.contract.port import GatewayError, Upstream
from llamad.gateway.core import Gateway
from llamad.gateway.relay.billing_header import stabilise
from llamad.gateway.relay.jsonmode import enforce
from llamad.gateway.relay.prompt_defaults import with_defaults

# Routed by the body's `model`.
BODY_ROUTED = (
    "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses",
    "/v1/messages", "/v1/messages/count_tokens", "/v1/rerank", "/rerank", "/infill",
    "/completion", "/tokenize", "/detokenize",
)  # fmt: skip


async def send_error(send: Send, exc: GatewayError, path: str = "/v1") -> None:
    """Answer with `exc` in `path`'s family's shape, with Retry-After when it has one."""
    headers = [(b"content-type", b"application/json")]
    if exc.retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode()))
    body = gateway_shape(path, exc.status, exc.code, exc.message)
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def outgoing(upstream: Upstream, path: str, body: bytes) -> bytes:
    """`body` as it goes to `upstream`: JSON mode in llama-server's form, Claude Code's
    billing block made stable, the model's prompt defaults where the request has none,
    and the backend's own changes."""
    sent = stabilise(path, enforce(path, body))
    if upstream.prompt is not None:
        sent = with_defaults(upstream.prompt, path, sent)
    return upstream.adapt(sent)


class Books:
    """The metrics and the activity record a relayed request leaves."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        metrics = gateway.metrics
        self.requests, self.latency, self.ttfb = metrics.requests, metrics.latency, metrics.ttfb

    def first_byte(self, tally: Tally, label: str, status: int) -> None:
        """The answer's head went out with `status`."""
        tally.status = status
        tally.ttfb = now()
        self.ttfb.labels(label).observe(tally.ttfb - tally.began)

    def close(self, tally: Tally, model: str, label: str) -> None:
        """The request is over; `label` is the name its lease resolved ("" when none
        did), `model` the name asked for."""
        end = now()
        if not label:  # refused before a lease: a known name keeps its own series
            label = model if model and self.gateway.find(model) else "-"
        # 499, as nginx logs it: the client closed the connection first.
        self.requests.labels(label, str(tally.status or 499)).inc()
        self.latency.labels(label).observe(end - tally.began)
        tally.model = tally.model or model
        self.gateway.activity.add(tally.record(end))
