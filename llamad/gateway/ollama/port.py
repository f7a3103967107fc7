"""What the Ollama layer needs from the gateway, as Protocols.

The gateway satisfies these structurally; the Ollama layer imports nothing of it, so either
side can change its internals freely.

keep_alive, as passed to `lease`: seconds of idle time after this request before the model
may be unloaded; 0 unloads it as soon as nothing is in flight; a negative value never
unloads it; None leaves the model's configured idle timeout alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol


class ModelView(Protocol):
    """One routable model as the gateway sees it right now."""

    @property
    def name(self) -> str: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...
    @property
    def host(self) -> str | None: ...  # the `[fleet]` peer that serves it; None: here
    @property
    def model_path(self) -> Path | None: ...
    @property
    def state(self) -> str: ...
    @property
    def loaded(self) -> bool: ...
    @property
    def on_demand(self) -> bool: ...
    @property
    def idle_timeout(self) -> float: ...
    @property
    def expires_at(self) -> float | None: ...  # epoch seconds
    @property
    def size_bytes(self) -> int | None: ...
    @property
    def ctx_size(self) -> int | None: ...
    @property
    def mmproj(self) -> bool: ...


class Upstream(Protocol):
    """A leased, ready llama-server: where to send the request and with which headers."""

    @property
    def base_url(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def model(self) -> ModelView: ...


class Gateway(Protocol):
    """The gateway's surface: listing, finding, leasing and unloading models.

    `lease` loads the model if needed and counts the request in flight while the context is
    open. It raises `llamad.gateway.port.GatewayError`s (unknown model, failed load, full
    queue, queue timeout), each with its HTTP status, message and Retry-After.
    """

    def models(self) -> Sequence[ModelView]: ...
    def find(self, name: str) -> ModelView | None: ...
    def lease(
        self, name: str, *, keep_alive: float | None = None
    ) -> AbstractAsyncContextManager[Upstream]: ...
    async def unload(self, name: str) -> None: ...
