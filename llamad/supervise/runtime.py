"""What every instance shares, and how one instance's process is launched and probed."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from llamad.backends import rpc
from llamad.backends.probes import Health, Prober, server_url
from llamad.backends.spec import InstanceSpec
from llamad.common.modelfile import model_problem
from llamad.fleet.remote_workers import Found, RemoteWorkers
from llamad.supervise.childlog import ChildLog
from llamad.supervise.orphans import ChildRegistry
from llamad.supervise.process import Child, ExitInfo, child_env, port_problem


@dataclass
class Runtime:
    """The binaries, the prober, where logs go, and the supervisor's hooks."""

    binary: Path
    prober: Prober
    log_dir: Path
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 3
    registry: ChildRegistry | None = None
    observe_probe: Callable[[str, Health], None] | None = None
    rpc_binary: Path | None = None
    # Set by the supervisor: which of these instances are not running yet (RPC heads wait
    # for their workers), and a hook for every process exit (a worker's restarts its heads).
    not_ready: Callable[[tuple[str, ...]], list[str]] = lambda names: []
    on_exit: Callable[[str], None] = lambda name: None
    # Workers on fleet peers, and the hook for one of them restarting (head, "peer/worker").
    remote: RemoteWorkers = field(default_factory=RemoteWorkers)
    on_remote_lost: Callable[[str, str], None] = lambda head, worker: None

    def open_log(self, spec: InstanceSpec) -> ChildLog:
        """The instance's output file, `log_dir/NAME.log`."""
        path = self.log_dir / f"{spec.name}.log"
        return ChildLog(path, self.log_max_bytes, self.log_backups, spec.secrets, spec.name)

    async def launch(
        self, spec: InstanceSpec, log: ChildLog, remote: Found | None = None
    ) -> Child | str:
        """Start the process for `spec`, or say why it cannot start now. An RPC head's
        `remote` workers, as found running just now, follow its local ones in LLAMA_ARG_RPC."""
        if (unwritable := log.problem()) is not None:
            return unwritable
        problem = model_problem(spec.model) or port_problem(spec.host, spec.port)
        if problem:
            log.mark(f"not started: {problem}")
            return problem
        binary = self.rpc_binary if spec.kind == rpc.KIND else self.binary
        argv = [str(binary), *spec.args]
        settings = dict(spec.settings)
        if remote:
            servers = [settings.get("LLAMA_ARG_RPC", ""), *(w.address for w in remote.values())]
            settings["LLAMA_ARG_RPC"] = ",".join(filter(None, servers))
        env = child_env(os.environ, settings, dict(spec.env))
        try:
            child = await Child.spawn(argv, env, log.write, log.redact)
        except OSError as exc:
            return f"cannot run {argv[0]}: {exc.strerror}"
        if self.registry is not None:
            self.registry.add(spec.name, child.pid)
        log.mark(f"started pid {child.pid}")
        return child

    async def watch_remote(self, spec: Callable[[], InstanceSpec], found: Found) -> None:
        """While a head runs (`spec` is its current one): restart it when a remote worker
        in `found` restarts. Returns at once for a head without remote workers."""
        await self.remote.watch(
            found,
            lambda: spec().knobs.health_interval,
            lambda worker: self.on_remote_lost(spec().name, worker),
        )

    def reaped(self, spec: InstanceSpec, child: Child, info: ExitInfo) -> str:
        """Book-keeping after an exit; returns the reason to show for it."""
        if self.registry is not None:
            self.registry.remove(child.pid)
        self.on_exit(spec.name)
        if any("couldn't bind HTTP server socket" in line for line in info.stderr_tail):
            return port_problem(spec.host, spec.port) or "port in use"
        return info.describe()

    def probe_for(self, spec: InstanceSpec) -> Callable[[float], Awaitable[Health]]:
        """`probe(timeout)` for `spec`: GET /health, or a TCP connect for an rpc worker."""
        host, port = spec.probe_host, spec.port
        if spec.kind == rpc.KIND:
            return lambda timeout: rpc.probe_tcp(host, port, timeout)
        url = server_url(host, port)
        return lambda timeout: self.prober.probe(url, timeout)
