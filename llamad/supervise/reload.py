"""Config reloads: triggered by a save, SIGHUP or the API; one at a time; surgical.

A reload returns once applied: the drains it sets going run in the background (see
supervise/handover.py), so a later reload, and a model it adds, never waits for them.

The watcher also notices a model file replaced on disk (that instance restarts) and an
executable changing after an upgrade (every instance that runs it restarts, one at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import structlog

from llamad.backends.registry import backend_for
from llamad.common.retrying import run_retrying
from llamad.common.waits import first_of
from llamad.config.load import ConfigError, load
from llamad.library.listing import log_changes
from llamad.lifecycle.states import State
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.file_watch import FileWatch
from llamad.supervise.instance import Instance
from llamad.supervise.library_watch import watch_library

log = structlog.get_logger("llamad.reload")


class Reloader:
    """Re-reads the config and applies the difference; the daemon state's one writer."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.supervisor = state.supervisor
        self._lock = asyncio.Lock()
        self._wanted = asyncio.Event()
        self._files = FileWatch(state.resolved)
        self._group: asyncio.TaskGroup | None = None
        self._rolling: asyncio.Task[object] | None = None
        self._unrolled: list[str] | None = None

    def request(self) -> None:
        """Ask for a reload soon; a burst of requests yields one reload of the final file."""
        self._wanted.set()

    async def reload(self, upgraded: frozenset[str] = frozenset()) -> dict[str, Any]:
        """Re-read the config and apply what changed; an invalid file changes nothing.
        `upgraded` names kinds whose executable was replaced in place."""
        async with self._lock:
            old = self.state.resolved
            # Identities from before the read: a save that lands while we reload is then
            # still news to the watcher, not mistaken for what we just applied.
            before = self._files.snapshot()
            try:
                new = await asyncio.to_thread(load, old.path, old)
            except Exception as exc:  # a ConfigError; nothing must crash a running daemon
                lines = getattr(exc, "lines", None) or [f"{old.path}: {exc}"]
                self.state.rejected(lines)
                log.error("config.rejected", path=str(old.path), errors=lines)
                raise ConfigError(lines) from None
            if new.daemon != old.daemon:
                log.warning("config.daemon_restart_needed", path=str(new.path))
            moved = {
                k for k, t in new.tools.items() if k in old.tools and old.tools[k].path != t.path
            }
            upgraded = upgraded | moved
            self.supervisor.runtime.reconfigure(new.tools, new.peers)
            changes = await self.supervisor.apply(new.instances)
            self.state.accepted(new)
            log_changes(old.library, new.library)
            self._files.follow(new, before)
            report: dict[str, Any] = changes.to_dict()
            # Applied: what drains (and stops, restarts or waits for a port) goes on in
            # the background, each logging `config.drained` when it is done.
            report["draining"] = self.supervisor.draining()
            if upgraded:
                # A new build: every instance that runs it restarts, never all at once.
                # An instance that names its own executable keeps it.
                runs = [new.instances[n] for n in changes.unchanged]
                rolling = [s.name for s in runs if s.kind in upgraded and s.tool is None]
                report["rolling_restart"] = rolling
                self._start_rolling(rolling)
            log.info("config.reloaded", path=str(new.path), **report)
            for line in new.warnings:
                log.warning("config.warning", path=str(new.path), warning=line)
            return report

    def _start_rolling(self, names: list[str]) -> None:
        # A newer build's rollout replaces the one under way. It runs in run()'s TaskGroup,
        # or once run() runs again (a rollout asked for between a failure and its retry).
        if self._rolling is not None:
            self._rolling.cancel()
        self._rolling, self._unrolled = None, names
        if self._group is None:
            return
        self._unrolled = None
        # A failure is logged and not retried: a second pass would restart again the
        # instances the first already restarted. Rollout.failed remembers what is left.
        roll = run_retrying(
            "rolling-restart",
            lambda: self.supervisor.restart_one_by_one(names),
            retry=False,
            event="binary.rollout_failed",
        )
        self._rolling = self._group.create_task(roll, name="rolling-restart")

    def _restart(self, inst: Instance) -> None:
        # In run()'s TaskGroup, not awaited here: the drain may wait minutes for requests
        # in flight, and the watcher goes on meanwhile.
        assert self._group is not None, "files are watched only inside run()"
        work = run_retrying(
            f"restart-{inst.spec.name}",
            lambda: self.supervisor.restart(inst),
            retry=False,
            event="model.restart_failed",
        )
        self._group.create_task(work, name=f"restart-{inst.spec.name}")

    async def run(self, stop: asyncio.Event) -> None:
        """Serve reload requests, watch files and roll out new builds until `stop` is set."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                group.create_task(self._serve_requests(stop))
                group.create_task(self._files.run(stop, self._on_change))
                group.create_task(watch_library(self._library_places, self.request, stop))
                if self._unrolled is not None:
                    self._start_rolling(self._unrolled)
                await stop.wait()
                if self._rolling is not None:
                    self._rolling.cancel()  # the instances are being stopped anyway
        finally:
            self._group = None

    async def _serve_requests(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await first_of(self._wanted.wait(), stop.wait())
            if stop.is_set():
                return
            self._wanted.clear()
            # An invalid file is logged and shown in status; the next good save clears it.
            with contextlib.suppress(ConfigError):
                await self.reload()

    def _library_places(self) -> list[Path]:
        lib = self.state.resolved.library
        return [*lib.places, lib.pull_dir] if lib else []

    async def _on_change(self) -> None:
        moved = self._files.moved()
        what = set(moved.values())
        upgraded = frozenset(w.removeprefix("binary:") for w in what if w.startswith("binary:"))
        for kind in sorted(upgraded):
            # `file`: the executable, or a ggml library it loads that changed under it.
            file = min(str(p) for p, w in moved.items() if w == f"binary:{kind}")
            tool = self.state.resolved.tools[kind].path
            log.info("binary.changed", kind=kind, path=str(tool), file=file)
        if upgraded:
            with contextlib.suppress(ConfigError):
                await self.reload(upgraded)
        elif "config" in what:
            self.request()
        for spec in self.state.resolved.instances.values():
            inst = self.supervisor.instances.get(spec.name)
            down = (State.STOPPED, State.IDLE, State.STOPPING)
            live = inst is not None and inst.record.state not in down
            changed = moved.keys() & set(backend_for(spec.kind).watched(spec))
            if live and inst is not None and changed:
                log.info("model.changed", instance=spec.name, model=str(min(changed)))
                self._restart(inst)
