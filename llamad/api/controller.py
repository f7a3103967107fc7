"""The running daemon as the control API sees it: status, commands and reload."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llamad import __version__
from llamad.api.cache import cache_figures
from llamad.api.errors import Conflict, InvalidConfig, UnknownInstance
from llamad.api.peer_doc import peer_doc
from llamad.api.status import ProcessFacts, instance_doc
from llamad.common.clock import utcnow
from llamad.config.load import ConfigError
from llamad.lifecycle.states import Event, Restart, Start, State, Stop
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.gateway_link import GatewayLink
from llamad.supervise.inbox import InstanceClosed
from llamad.supervise.instance import Instance

if TYPE_CHECKING:  # the gateway's modules load only when one is configured
    from llamad.gateway.core import Gateway

_STARTED = (State.RUNNING, State.FAILED)
_STOPPED = (State.STOPPED, State.FAILED)


class DaemonController:
    """Implements `control.Controller` over the daemon state; `reload` applies the file."""

    def __init__(
        self,
        state: DaemonState,
        reload: Callable[[], Awaitable[dict[str, Any]]],
        metrics: Callable[[], Awaitable[bytes]],
        gateway: GatewayLink[Gateway],
        views: Mapping[str, Callable[[], object]],
    ) -> None:
        self.state = state
        self._gateway = gateway  # connected when `[gateway] listen` is served
        self._views = views  # the daemon's services' own keys (listeners, keep_awake)
        self._reload = reload
        self._metrics = metrics
        self.supervisor = state.supervisor
        self.started_at = utcnow()
        self._t0 = time.monotonic()
        self._facts = ProcessFacts()

    # Views ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The whole status document."""
        r = self.state.resolved
        llama = r.llama_server
        insts = list(self.supervisor.instances.values())
        self._facts.forget_except({i.child.pid for i in insts if i.child is not None})
        return {
            "daemon": {
                **self._identity(),
                "config_error": self.state.config_error,
                "draining": self.supervisor.draining(),
                "uptime_s": round(time.monotonic() - self._t0, 3),
                "llama_server": str(llama.path) if llama else None,
                "llama_server_version": llama.version if llama else None,
                "backends": {kind: tool.to_dict() for kind, tool in r.tools.items()},
                **{key: view() for key, view in self._views.items()},
            },
            "instances": [self._doc(i) for i in insts],
            **({"gateway": gateway.status()} if (gateway := self._gateway.current) else {}),
        }

    def peer(self) -> dict[str, Any]:
        """The peer document (`peer_doc.py`): no process is asked for it."""
        gateway = self._gateway.current
        if gateway is None:
            return peer_doc(self._identity(), [], None)
        routed = [
            (name, inst.record.state.value, gateway.status_of(name))
            for name, inst in self.supervisor.instances.items()
            if gateway.router.find(name) is not None
        ]
        return peer_doc(self._identity(), routed, gateway.status())

    def _identity(self) -> dict[str, Any]:
        """Which daemon this is (`fleet.peers.identity`), and its version."""
        return {
            "pid": os.getpid(),
            "version": __version__,
            "config_path": str(self.state.resolved.path),
            "started_at": self.started_at,
        }

    def _get(self, name: str) -> Instance:
        inst = self.supervisor.instances.get(name)
        if inst is None:
            raise UnknownInstance(name)
        if inst.closing:
            raise Conflict(f"instance {name!r} is being removed")
        return inst

    def _doc(self, inst: Instance) -> dict[str, Any]:
        spec, sup = inst.spec, self.supervisor
        down = sup.not_ready(spec.workers) + sup.runtime.remote.not_running(spec.remote_workers)
        doc = instance_doc(inst, self._facts, down)
        doc["prompt_cache"] = cache_figures(spec, sup.runtime.cache)
        gateway = self._gateway.current
        if gateway is not None and gateway.router.find(spec.name) is not None:
            doc["gateway"] = gateway.status_of(spec.name)
        return doc

    def instance(self, name: str) -> dict[str, Any]:
        """One instance's entry of the status document."""
        return self._doc(self._get(name))

    def log_file(self, name: str) -> Path:
        """Where the instance's output goes."""
        return self._get(name).log.path

    # Commands --------------------------------------------------------------------

    async def start(self, name: str, wait: float | None = None) -> dict[str, Any]:
        """Start (or clear FAILED); with `wait`, answer once running or failed."""
        return await self._command(name, Start(), wait, _STARTED)

    async def stop(self, name: str, wait: float | None = None) -> dict[str, Any]:
        """Stop gracefully; with `wait`, answer once stopped (or failed: no process either)."""
        return await self._command(name, Stop(), wait, _STOPPED)

    async def restart(self, name: str, wait: float | None = None) -> dict[str, Any]:
        """Restart, coalesced with a start already under way; `wait` as for start."""
        return await self._command(name, Restart(), wait, _STARTED)

    async def _command(
        self, name: str, event: Event, wait: float | None, target: tuple[State, ...]
    ) -> dict[str, Any]:
        # Once send() returns the machine has taken the event in, so the record no longer
        # shows the state from before the command: reaching `target` is its outcome.
        inst = self._get(name)
        if name not in self.supervisor.wanted:  # draining: a start could take a port it hands on
            raise Conflict(f"instance {name!r} is being removed")
        if self.supervisor.handovers.pending(name):  # its old launch could take a port too
            raise Conflict(f"instance {name!r} is being handed over by a reload; try again soon")
        try:
            await inst.send(event)
        except InstanceClosed:  # removed (or the daemon stopping) while it waited
            raise Conflict(f"instance {name!r} is being removed") from None
        if wait:
            await inst.wait_until(*target, timeout=wait)
        return self._doc(inst)

    async def metrics(self) -> bytes:
        """Prometheus exposition text."""
        return await self._metrics()

    async def reload(self) -> dict[str, Any]:
        """Re-read the config file and apply what changed; an invalid file changes nothing."""
        try:
            return await self._reload()
        except ConfigError as exc:
            raise InvalidConfig("\n".join(exc.lines)) from None
