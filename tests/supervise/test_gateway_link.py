"""The link the supervisor, the pulls and the status reach the gateway through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from llamad.supervise.gateway_link import GatewayLink


class Drainer:
    """A gateway whose drain records what it was asked to drain."""

    def __init__(self) -> None:
        self.drained: list[tuple[list[str], list[str]]] = []

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def drain() -> AsyncIterator[None]:
            self.drained.append((removed, changed))
            yield

        return drain()


async def test_nothing_drains_until_a_gateway_is_connected() -> None:
    link: GatewayLink[Drainer] = GatewayLink()
    assert link.current is None
    async with link.draining(["a"], []):
        pass
    gateway = Drainer()
    link.connect(gateway)
    assert link.current is gateway
    async with link.draining(["a"], ["b"]):
        pass
    assert gateway.drained == [(["a"], ["b"])]


def test_a_link_connects_once() -> None:
    link: GatewayLink[Drainer] = GatewayLink()
    link.connect(Drainer())
    with pytest.raises(RuntimeError, match="already connected"):
        link.connect(Drainer())
