"""The gateway as seen by what the daemon builds before it: the supervisor's drain and
its probes' view of requests in flight, a removal's unload and the status document.

The supervisor runs instances before the web stack loads, and the gateway is built on
the supervisor: the link is given to the earlier objects' constructors empty and
connected once, when the gateway exists.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Generic, Protocol, TypeVar


class Drains(Protocol):
    """What the supervisor needs of a gateway: its drain around stops and starts."""

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        """Requests in flight to `removed` and `changed` end first; new ones wait."""
        ...

    def requests(self, name: str | None = None) -> int:
        """Requests of `name` (of every model when None) in flight or waiting."""
        ...


G = TypeVar("G", bound=Drains)


class GatewayLink(Generic[G]):
    """The gateway once one serves; until then, and in a daemon without one, nothing
    drains and `current` is None."""

    def __init__(self) -> None:
        self._gateway: G | None = None

    def connect(self, gateway: G) -> None:
        """The gateway is built: from now on the link leads to it."""
        if self._gateway is not None:
            raise RuntimeError("a gateway is already connected")
        self._gateway = gateway

    @property
    def current(self) -> G | None:
        """The connected gateway, or None."""
        return self._gateway

    def draining(self, removed: list[str], changed: list[str]) -> AbstractAsyncContextManager[None]:
        """The gateway's drain (`Supervisor`'s `draining`), or nothing to wait for."""
        gateway = self._gateway
        return nullcontext() if gateway is None else gateway.draining(removed, changed)

    def requests(self, name: str | None = None) -> int:
        """The gateway's requests in flight or waiting (`Gateway.requests`); 0 without one."""
        gateway = self._gateway
        return 0 if gateway is None else gateway.requests(name)
