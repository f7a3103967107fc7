"""Sending a leased request once more when its process died before answering.

Inference requests have no side effects, so a request that reached no answer can be sent
again. It is, once, and only when its instance is seen restarting: then it goes to the
process that follows, as a request would that arrived during the restart. A request whose
answer had begun to reach its client is never sent again: its client gets a clean end
instead. (A whole answer reaches it only once all of it is in: see `proxy.py`.)

A request can also reach the successor itself: admitted while the old process still
seemed to run, it connected once the new one listened, and got the 503 it gives while it
loads. That is no answer either: the request waits for the successor to serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from llamad.gateway.contract.port import GatewayPort, Upstream, UpstreamError
from llamad.upstream.answer import Answer
from llamad.upstream.connection import NotAnswered

T = TypeVar("T")


async def answered(
    gateway: GatewayPort, upstream: Upstream, attempt: Callable[[Upstream], Awaitable[T]]
) -> T:
    """`attempt(upstream)`, and once more on its successor when its process died before
    answering (`GatewayPort.restarted`). A failure that stays is an UpstreamError."""
    try:
        return await attempt(upstream)
    except NotAnswered as exc:
        again = await gateway.restarted(upstream)
        if again is None:
            raise _error(upstream, exc) from None
    try:
        return await attempt(again)
    except NotAnswered as exc:
        raise _error(again, exc) from None


def _error(upstream: Upstream, exc: Exception) -> UpstreamError:
    where = f" on {upstream.host}" if upstream.host else ""
    return UpstreamError(f"model {upstream.name!r}{where}: {exc or type(exc).__name__}")


def from_leased(upstream: Upstream, answer: Answer) -> Answer:
    """`answer`, unless it is a 503 from another process than the one leased: its
    successor's while it loads, which is closed and raised as NotAnswered."""
    if answer.status == 503 and upstream.replaced():
        answer.close()
        raise NotAnswered("its successor answered before it was ready", sent=True)
    return answer
