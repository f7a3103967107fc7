"""What every instance shares, and how one instance's process is launched and probed."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import structlog

from llamad.backends.devices.placed import placed
from llamad.backends.probes import Health, Prober
from llamad.backends.quarantine import GATEKEEPER, Quarantine
from llamad.backends.registry import backend_for
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import Tool
from llamad.common.childenv import child_env
from llamad.common.modelfile import model_problem
from llamad.fleet.remote_workers import Found, RemoteWorkers
from llamad.fleet.table import Peer
from llamad.lifecycle.states import Knobs
from llamad.supervise.childlog import ChildLog
from llamad.supervise.orphans import ChildRegistry
from llamad.supervise.process import Child, ExitInfo, port_problem
from llamad.supervise.slot_cache import SlotCache

events = structlog.get_logger("llamad.instance")


@dataclass
class Runtime:
    """The executables, the prober, where logs go, and the fleet's RPC workers."""

    tools: dict[str, Tool]  # kind -> executable; replaced on reload
    prober: Prober
    log_dir: Path
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 3
    registry: ChildRegistry | None = None
    # Workers on fleet peers.
    remote: RemoteWorkers = field(default_factory=RemoteWorkers)
    # The prompt cache kept across processes; None: no instance keeps one.
    cache: SlotCache | None = None
    # Names macOS's refusal of a quarantined download, with its fix.
    quarantine: Quarantine = GATEKEEPER
    # Requests the gateway has in flight to (or waiting for) an instance, by name.
    requests: Callable[[str], int] = lambda name: 0

    def reconfigure(self, tools: dict[str, Tool], peers: dict[str, Peer]) -> None:
        """A reload's executables and fleet peers: the next launches and looks use them."""
        self.tools = tools
        self.remote.follow(peers)

    def open_log(self, spec: InstanceSpec) -> ChildLog:
        """The instance's output file, `log_dir/NAME.log` (a library model's `/` escaped)."""
        path = self.log_dir / f"{quote(spec.name, safe=':+')}.log"
        return ChildLog(path, self.log_max_bytes, self.log_backups, spec.secrets, spec.name)

    async def launch(
        self,
        spec: InstanceSpec,
        log: ChildLog,
        remote: Found | None = None,
        device: str | None = None,
    ) -> Child | str:
        """Start the process for `spec`, or say why it cannot start now. An RPC head's
        `remote` workers, as found running just now, follow its local ones in LLAMA_ARG_RPC;
        `device` is where the gateway placed it, when the config does not say."""
        if (unwritable := log.problem()) is not None:
            return unwritable
        problem = model_problem(spec.model) or await port_problem(spec.host, spec.port)
        if problem:
            log.mark(f"not started: {problem}")
            return problem
        tool = spec.tool or self.tools.get(spec.kind)
        if tool is None:
            return f"no {spec.kind} executable: the config's [daemon] section names none"
        found = {name: w.address for name, w in (remote or {}).items()}
        if self.cache is not None:
            spec = self.cache.launchable(spec)
        spec = placed(spec, device)
        argv, settings = backend_for(spec.kind).command(spec, tool, found)
        marker = self.registry.env() if self.registry is not None else {}
        env = child_env(os.environ, settings, dict(spec.env), marker)
        try:
            child = await Child.spawn(argv, env, log.write)
        except OSError as exc:
            why = self.quarantine.refused_exec(tool.path, exc)
            return why or f"cannot run {argv[0]}: {exc.strerror}"
        if self.registry is not None:
            self.registry.add(spec.name, child.pid)
        log.mark(f"started pid {child.pid}: {tool.command}")
        events.info(
            "instance.spawned", instance=spec.name, pid=child.pid, command=str(tool.command)
        )
        return child

    async def watch_remote(
        self, spec: Callable[[], InstanceSpec], found: Found, lost: Callable[[str], None]
    ) -> None:
        """While a head runs (`spec` is its current one): call `lost(worker)` when a remote
        worker in `found` restarts. Returns at once for a head without remote workers."""
        await self.remote.watch(found, lambda: spec().knobs.health_interval, lost)

    async def reaped(self, spec: InstanceSpec, child: Child, info: ExitInfo) -> str:
        """Book-keeping after an exit; returns the reason to show for it."""
        if self.registry is not None:
            self.registry.remove(child.pid)
        tool = spec.tool or self.tools.get(spec.kind)
        if tool and (why := self.quarantine.refused_run(tool.path, info.signal, info.stderr_tail)):
            return why
        if any("couldn't bind HTTP server socket" in line for line in info.stderr_tail):
            return await port_problem(spec.host, spec.port) or "port in use"
        return info.describe()

    def probe_for(
        self, spec: InstanceSpec, knobs: Callable[[], Knobs]
    ) -> Callable[[float], Awaitable[Health]]:
        """`probe(timeout)` for `spec`, as its backend asks (GET /health, a TCP connect...)."""
        busy = lambda: self.requests(spec.name) > 0  # noqa: E731
        return backend_for(spec.kind).probe(spec, self.prober, knobs, busy)
