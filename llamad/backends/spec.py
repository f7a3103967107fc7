"""One instance, fully resolved: what to run and how to watch it.

Reload compares these: two specs with the same `launch` tuple run the same process, so
an unchanged instance is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from llamad.backends.prompt import PromptDefaults
from llamad.backends.tool import Tool
from llamad.lifecycle.states import Knobs

WILDCARDS = {"0.0.0.0", "::", ""}


@dataclass(frozen=True)
class InstanceSpec:
    """One instance, fully resolved: what to run and how to watch it."""

    name: str
    host: str
    port: int
    model: Path | None
    settings: tuple[tuple[str, str], ...]  # the backend's environment (LLAMA_*), sorted
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # the user's extra environment, sorted
    autostart: bool = True
    watch_model: bool = True
    knobs: Knobs = field(default_factory=Knobs)
    secrets: tuple[str, ...] = ()  # blanked out of the child's log
    api_key: str | None = None  # what llamad presents to the server (metrics re-export)
    kind: str = "llama-server"
    workers: tuple[str, ...] = ()  # local rpc-workers this head needs ready first
    remote_workers: tuple[tuple[str, str], ...] = ()  # (peer, worker): asked at launch
    # The gateway's: supervise-only, so none of them is part of `launch`.
    on_demand: bool = False  # started by the first request, not at boot
    idle_timeout: float = 600.0  # an on-demand instance stops this long after its last request
    pinned: bool = False  # `evict = "never"`: never stopped for another model, nor idle
    aliases: tuple[str, ...] = ()  # more model names the gateway routes here
    max_body: int | None = None  # bytes of request body the gateway admits; None: its own
    memory_estimate: int | None = None  # bytes the config says it needs; None: estimate it
    prompt: PromptDefaults | None = None  # a store's system and stop for each request
    # The instance's own executable (its table's `llama_server`); None: its kind's, from
    # `[daemon]`. Its build is part of `launch`: a new one restarts the instance.
    tool: Tool | None = None
    # Where the prompt cache is kept across processes (slot save files), None when it is
    # not; `cache_note` says why not when the user did not turn it off.
    prompt_cache: Path | None = None
    cache_note: str | None = None
    # `cache_swa_full`: the full-size sliding-window cache at whatever it costs; and
    # that cost in bytes, for a sliding-window model (None: not one, or not sized).
    cache_swa_full: bool = False
    window_cost: int | None = None

    @property
    def launch(self) -> tuple[object, ...]:
        """Everything that needs a new process when it changes."""
        return (
            self.kind,
            self.host,
            self.port,
            self.model,
            self.settings,
            self.args,
            self.env,
            self.remote_workers,
            self.tool,
        )

    @property
    def probe_host(self) -> str:
        """Where to reach the server: a wildcard bind is reached on loopback."""
        first = self.host.split(",")[0].strip()
        if first in WILDCARDS:
            return "::1" if first == "::" else "127.0.0.1"
        return first
