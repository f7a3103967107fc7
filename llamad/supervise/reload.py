"""Config reloads: triggered by a save, SIGHUP or the API; one at a time; surgical.

The watcher also notices a model file replaced on disk (that instance restarts) and an
executable changing after an upgrade (every instance that runs it restarts, one at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import structlog
import watchfiles

from llamad.backends.registry import backend_for
from llamad.common.retrying import run_retrying
from llamad.config.load import ConfigError, load
from llamad.library.listing import log_changes
from llamad.lifecycle.states import State
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.instance import Instance
from llamad.supervise.library_watch import watch_library

log = structlog.get_logger("llamad.reload")

# watchfiles waits 1.6 s by default; a reload should follow a save within a second.
DEBOUNCE_MS = 100

FileId = tuple[int, int, int]


def file_id(path: Path) -> FileId | None:
    """(inode, size, mtime) of what `path` points at; None when it is missing."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Reloader:
    """Re-reads the config and applies the difference; the daemon state's one writer."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.supervisor = state.supervisor
        self._lock = asyncio.Lock()
        self._wanted = asyncio.Event()
        self._rewatch = asyncio.Event()
        self._files = self._watched()
        self._ids = self._snapshot()
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
            before = self._snapshot()
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
            old_dirs = self._dirs()
            self.state.accepted(new)
            log_changes(old.library, new.library)
            self._files = self._watched()
            self._ids = {p: before[p] if p in before else file_id(p) for p in self._files}
            if self._dirs() != old_dirs:
                self._rewatch.set()
            report: dict[str, Any] = changes.to_dict()
            if upgraded:
                # A new build: every instance that runs it restarts, never all at once.
                rolling = [n for n in changes.unchanged if new.instances[n].kind in upgraded]
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
                group.create_task(self._watch(stop))
                group.create_task(watch_library(self._library_places, self.request, stop))
                if self._unrolled is not None:
                    self._start_rolling(self._unrolled)
                await stop.wait()
                if self._rolling is not None:
                    self._rolling.cancel()  # the instances are being stopped anyway
        finally:
            self._group = None

    async def _serve_requests(self, stop: asyncio.Event) -> None:
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                wanted = asyncio.ensure_future(self._wanted.wait())
                await asyncio.wait({wanted, stopping}, return_when=asyncio.FIRST_COMPLETED)
                wanted.cancel()
                if stop.is_set():
                    return
                self._wanted.clear()
                # An invalid file is logged and shown in status; the next good save clears it.
                with contextlib.suppress(ConfigError):
                    await self.reload()
        finally:
            stopping.cancel()

    # Watching files ------------------------------------------------------------------

    def _watched(self) -> dict[Path, str]:
        """Every file whose change matters, with what it is: config, an executable
        (`binary:KIND`) or a file an instance runs from (model)."""
        r = self.state.resolved
        files = {r.path: "config"}
        for kind, tool in r.tools.items():
            files[tool.path] = files[Path(os.path.realpath(tool.path))] = f"binary:{kind}"
        for spec in r.instances.values():
            for path in backend_for(spec.kind).watched(spec):
                files.setdefault(path, "model")
        return files

    def _library_places(self) -> list[Path]:
        lib = self.state.resolved.library
        return [*lib.places, lib.pull_dir] if lib else []

    def _dirs(self) -> list[str]:
        return sorted({str(p.parent) for p in self._files if p.parent.is_dir()})

    def _snapshot(self) -> dict[Path, FileId | None]:
        return {path: file_id(path) for path in self._files}

    async def _watch(self, stop: asyncio.Event) -> None:
        # A session lasts until the set of watched directories changes. Every wake-up,
        # including a quiet five seconds, compares file identities: what decides is the
        # comparison, so a change made while a session was being set up is not lost.
        while not stop.is_set():
            session = asyncio.Event()
            self._rewatch.clear()
            ender = asyncio.create_task(_first_of(stop, self._rewatch, then=session))
            try:
                async for _ in watchfiles.awatch(
                    *self._dirs(),
                    watch_filter=lambda _change, path: Path(path) in self._files,
                    debounce=DEBOUNCE_MS,
                    # The Rust side wakes every `step` ms to check stop_event; 50 ms keeps
                    # a save's reload quick and costs little when idle.
                    step=50,
                    stop_event=session,
                    recursive=False,
                    rust_timeout=5000,
                    yield_on_timeout=True,
                ):
                    await self._on_change()
            finally:
                ender.cancel()

    async def _on_change(self) -> None:
        files = self._files
        now = {path: file_id(path) for path in files}
        moved = {p for p, fid in now.items() if fid != self._ids.get(p) and fid is not None}
        self._ids.update(now)
        what = {files.get(p, "") for p in moved}
        upgraded = frozenset(w.removeprefix("binary:") for w in what if w.startswith("binary:"))
        for kind in sorted(upgraded):
            log.info("binary.changed", kind=kind, path=str(self.state.resolved.tools[kind].path))
        if upgraded:
            with contextlib.suppress(ConfigError):
                await self.reload(upgraded)
        elif "config" in what:
            self.request()
        for spec in self.state.resolved.instances.values():
            inst = self.supervisor.instances.get(spec.name)
            down = (State.STOPPED, State.IDLE, State.STOPPING)
            live = inst is not None and inst.record.state not in down
            changed = moved.intersection(backend_for(spec.kind).watched(spec))
            if live and inst is not None and changed:
                log.info("model.changed", instance=spec.name, model=str(min(changed)))
                self._restart(inst)


async def _first_of(*events: asyncio.Event, then: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
        then.set()
