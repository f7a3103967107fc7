"""The one interface every kind of server implements, and what passes through it.

Config resolution, launching, probing, status and reload all ask the instance's backend;
nothing outside `backends/` looks at an instance's kind to decide anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llamad.backends.probes import Health, Prober
from llamad.backends.serving import Serving
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import ServerCommand, Tool
from llamad.lifecycle.states import Knobs

# Reports a problem with the keys under the instance's table, e.g. (("port",), "is required").
Problem = Callable[[tuple[str, ...], str], None]
# `probe(timeout)` -> the instance's health now.
ProbeFn = Callable[[float], Awaitable[Health]]


@dataclass
class ResolveContext:
    """What a backend may consult while it resolves one instance of a config file."""

    tools: Mapping[str, Tool]
    defaults: Mapping[str, Any]  # the raw `[defaults]` table
    peers: frozenset[str]  # `[fleet] peers` names, for `peer/worker` RPC references
    resolved: Mapping[str, InstanceSpec]  # instances resolved so far (lower `order` first)
    own_keys: tuple[str, ...] = ()  # llamad's own instance keys, for "did you mean" hints
    # Per-load scratch space, e.g. `[defaults]` rendered once and its problems reported once.
    memo: dict[str, Any] = field(default_factory=dict)
    report_at: Callable[[tuple[str, ...]], Problem] = lambda prefix: lambda keys, msg: None
    # The config file's directory: relative file paths in values are taken from there.
    base_dir: Path = field(default_factory=Path.cwd)


class Backend(Protocol):
    """One kind of server: how its table is read, how it is run, probed and watched."""

    kind: str  # the `kind = "..."` value that selects it
    executable_key: str  # the `[daemon]` key that names its executable
    order: int  # resolution order: servers others depend on (RPC workers) come first
    serves_http: bool  # an OpenAI-compatible HTTP server the gateway can route to

    def find(self, configured: str | None, cache_dir: Path) -> ServerCommand:
        """The executable to run: `configured`, else PATH, else a bundled copy.
        Raises CatalogError with one line when there is none."""
        ...

    def inspect(self, command: ServerCommand, cache_dir: Path) -> Tool:
        """Read what the executable is and accepts (cached); raises CatalogError."""
        ...

    def resolve(
        self, base: InstanceSpec, keys: dict[str, Any], ctx: ResolveContext, problem: Problem
    ) -> InstanceSpec:
        """Fill in `base` (llamad's own keys already applied) from the table's other
        `keys`; reports every problem through `problem`."""
        ...

    def command(
        self, spec: InstanceSpec, tool: Tool, remote: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """argv and the environment layer for one launch; `remote` maps fleet worker
        names to addresses found just now (RPC heads)."""
        ...

    def probe(
        self,
        spec: InstanceSpec,
        prober: Prober,
        knobs: Callable[[], Knobs],
        busy: Callable[[], bool],
    ) -> ProbeFn:
        """How to ask a running instance whether it is healthy; `knobs` gives its current
        `[supervise]` settings (a reload changes them without a restart), `busy` whether
        the gateway has requests in flight to it now."""
        ...

    def request_body(self, spec: InstanceSpec, body: bytes) -> bytes:
        """The body of a request the gateway proxies to this instance, as it must go."""
        ...

    def memory_estimate(self, spec: InstanceSpec) -> int | None:
        """Bytes the loaded model needs, when the backend knows; None leaves it to the
        gateway's own reading of a GGUF file."""
        ...

    def watched(self, spec: InstanceSpec) -> tuple[Path, ...]:
        """Files whose replacement means the instance must restart (its model)."""
        ...

    def status_extras(self, spec: InstanceSpec) -> dict[str, Any]:
        """Keys the status document adds for this kind (none for a plain llama-server)."""
        ...

    def serving(self, spec: InstanceSpec) -> Serving:
        """What the gateway must know of how the model is served (names, capabilities,
        context per request)."""
        ...
