"""What other route sets (the Ollama facade) code against: views, upstreams and errors.

`Gateway` in `core.py` implements `GatewayPort`; a route set gets one and mounts its
routes on the gateway's app with `app.build_app(gateway, extra_routes, pool=...)`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llamad.backends.prompt import PromptDefaults
from llamad.backends.serving import Serving
from llamad.gateway.contract.caller import Caller


class Counts(Protocol):
    """What an answer said of its prompt (`books`' `Usage`)."""

    @property
    def cached_tokens(self) -> int | None: ...
    @property
    def evaluated_tokens(self) -> int | None: ...
    @property
    def prompt_ms(self) -> float | None: ...


class Record(Protocol):
    """What a lease writes in the record of the request it serves (`books`' `Tally`),
    and reads back once its answer has ended."""

    model: str
    instance: str | None
    host: str | None

    @property
    def usage(self) -> Counts: ...

    def waited(self, seconds: float, loading: bool) -> None: ...


class Asking(Protocol):
    """The request a lease serves, as the door decided it (`access/call.py`'s `Call`):
    its body (hashed for affinity), whether it wants affinity, the gateway that relayed
    it (never relayed again), and its record."""

    @property
    def doc(self) -> Any: ...
    @property
    def affinity(self) -> bool: ...
    @property
    def relayed(self) -> str | None: ...
    @property
    def tally(self) -> Record | None: ...


@dataclass(frozen=True)
class ModelView:
    """One routable model, read without waiting."""

    name: str  # the instance name
    aliases: tuple[str, ...]
    model_path: Path | None  # the GGUF file (None for hub/URL models)
    state: str  # the instance state ("running", "idle", "stopped", ...)
    loaded: bool  # a process serves it now
    on_demand: bool
    idle_timeout: float  # seconds; 0 = never
    expires_at: float | None  # wall-clock epoch seconds when it will be idle-stopped
    size_bytes: int | None  # memory estimate (bytes) or measured footprint
    ctx_size: int | None  # the configured context (LLAMA_ARG_CTX_SIZE) if known
    mmproj: bool  # an mmproj is configured (vision)
    host: str | None = None  # the `[fleet]` peer that serves it; None: this llamad
    # How its server serves it (answer name, capabilities, context per request); a
    # fleet peer's is unknown here (its own gateway answers by the name asked).
    serving: Serving = field(default_factory=Serving)
    load_progress: Mapping[str, Any] | None = None  # while it loads (progress.LoadProgress)
    replicas: tuple[str, ...] = ()  # the hosts serving it ("local": this llamad), if listed
    # An alias several local instances share: those instances (its replicas); else ().
    instances: tuple[str, ...] = ()
    prompt: PromptDefaults | None = None  # its store's system, stop and template text


@dataclass(frozen=True)
class Upstream:
    """Where to send a leased request: the model it was resolved to (once, by the
    lease), the instance's address and its own auth."""

    base_url: str  # "http://127.0.0.1:8089"
    headers: Mapping[str, str]  # the instance's own auth (Authorization: Bearer ...)
    name: str  # the instance (or the fleet peer's model) serving it: the metrics label
    host: str | None = None  # the `[fleet]` peer that serves it; None: this llamad
    # The `model` its server writes in answers (`Serving.answer_name`); None: as asked.
    answer_name: str | None = None
    model_path: Path | None = None  # the GGUF file, which `/props` names
    # The request body as the instance's backend needs it (mlx pins `model`).
    adapt: Callable[[bytes], bytes] = lambda body: body
    # Its model's system prompt and stop words for requests without their own; None:
    # none, and bodies go through unparsed (`prompt_defaults`).
    prompt: PromptDefaults | None = None
    pid: int | None = None  # the process leased (None: a fleet peer)
    # True once the instance's process is another than `pid`: it exited, and its
    # successor may already hold its port (and answer 503 while it loads).
    replaced: Callable[[], bool] = lambda: False
    # Another replica of the model, once this one failed before answering (replicas/).
    failover: Callable[[], Awaitable[Upstream | None]] | None = None


class GatewayError(Exception):
    """A request the gateway cannot serve; `status` is its HTTP status."""

    status = 503
    code = "unavailable"
    retry_after: float | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownModel(GatewayError):
    """No instance or alias has that name; the message lists what exists."""

    status = 404
    code = "model_not_found"

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"model {name!r} does not exist; available: {', '.join(known) or 'none'}")
        self.name, self.known = name, known


# An absolute (or ~) path: what a client is told keeps only its last part.
_PATH = re.compile(r"(?<![\w.:/~-])~?/(?:[^\s/'\"():,|]*/)+([^\s/'\"():,|]*)")


def without_paths(text: str) -> str:
    """`text` with each file path cut to its name: llama-server's last words name the
    model's full path (and so the user's home), which clients have no need of. The log
    keeps them whole."""
    return _PATH.sub(lambda m: m.group(1) or "...", text)


class LoadFailed(GatewayError):
    """The model could not be started; `reason` holds llama-server's last words (the
    message, for clients, holds them without file paths)."""

    code = "load_failed"
    retry_after: float | None = 5.0

    def __init__(self, name: str, reason: str, retry_after: float | None = None) -> None:
        super().__init__(f"model {name!r} failed to load: {without_paths(reason)}")
        self.reason = reason
        if retry_after is not None:
            self.retry_after = retry_after


class NoRoom(LoadFailed):
    """No device can ever hold the model: a device it needs has less room than it takes
    even with every model that may be evicted gone. Waiting would not help."""

    status = 507
    code = "insufficient_memory"
    retry_after = None

    def __init__(self, name: str, line: str) -> None:
        GatewayError.__init__(self, line)
        self.reason = line


class Removed(GatewayError):
    """The model was removed from the config while the request waited for it."""

    status = 404
    code = "model_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"model {name!r} was removed from the config")


class QueueFull(GatewayError):
    """Too many requests already wait for this model (`[gateway] max_queue`)."""

    status = 429
    code = "queue_full"
    retry_after = 1.0


class QueueTimeout(GatewayError):
    """The model did not load, or no room was made for it, within `queue_timeout`."""

    code = "queue_timeout"
    retry_after = 10.0


class Unavailable(GatewayError):
    """The model is not served now and the gateway does not start it (an always-on
    instance a person stopped, or one being removed)."""

    retry_after = 5.0

    def __init__(self, message: str) -> None:
        super().__init__(without_paths(message))  # the instance's last words, for clients


class UpstreamError(GatewayError):
    """The instance could not be reached or broke off."""

    status = 502
    code = "upstream_error"


class GatewayPort(Protocol):
    """The gateway as a route set sees it."""

    def models(self, caller: Caller) -> list[ModelView]:
        """Every routable model `caller` may use, never waiting on a load."""
        ...

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (instance name or alias), or None."""
        ...

    def lease(
        self, name: str, *, keep_alive: float | None = None, asking: Asking | None = None
    ) -> AbstractAsyncContextManager[Upstream]:
        """Load `name` if needed and hold it in flight while the context is open, for
        the request `asking` (None: one of the gateway's own).

        One load serves every waiter; the wait is bounded by `queue_timeout`. On exit the
        idle timer starts from now; `keep_alive` (seconds; 0 = unload once idle; < 0 =
        never) replaces the model's idle timer from this request on. Raises
        UnknownModel, LoadFailed, QueueFull, QueueTimeout or Unavailable.
        """
        ...

    async def restarted(self, upstream: Upstream) -> Upstream | None:
        """The process behind `upstream` failed before answering. If it is
        being restarted, wait until it serves again and return where to send the request
        once more; None when it is not (the failure is the answer). The lease stays held.

        Raises QueueTimeout, Unavailable or Removed when it does not come back."""
        ...

    async def unload(self, name: str) -> None:
        """Stop `name` now (to IDLE), once its in-flight requests have finished."""
        ...

    def running(self, name: str) -> Upstream | None:
        """Where this host's model `name` serves now, without leasing it (no load, no
        idle timer touched); None when no process of it is running."""
        ...
