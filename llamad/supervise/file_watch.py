"""The files a reload depends on: the config, each executable (and the ggml libraries it
loads) and each instance's model files, their identities, and a watch of their
directories that reports what moved.

A watched file may be a symlink that never changes itself while something it resolves
through is swapped: a Kubernetes ConfigMap renames a new `..data` link over the old one,
NixOS re-points `/etc/static`. A change to any link on the way wakes the watch at once;
what moved is still told by the files themselves, the config by its contents' digest,
so a swap is one reload of the whole new file, and a swap to the same text none."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import watchfiles

from llamad.backends.linked_libs import linked_libraries
from llamad.backends.registry import backend_for
from llamad.common.fileid import FileId, digest, file_id
from llamad.common.symlinks import links
from llamad.common.waits import first_of
from llamad.config.load import Resolved

# watchfiles waits 1.6 s by default; a reload should follow a save within a second.
DEBOUNCE_MS = 100
# A change no event told of (a file system without them) is still seen this late.
QUIET_WAKE_S = 5.0

# Path -> what it is: "config" (or an instance's own executable: a reload reads it again),
# "binary:KIND" (a kind's executable) or "model".
Watched = dict[Path, str]


def watched(resolved: Resolved) -> Watched:
    """Every file whose change matters under `resolved`, with what it is."""
    files = {resolved.path: "config"}
    for kind, tool in resolved.tools.items():
        # A new ggml under an unchanged executable (Homebrew's own formula) is an upgrade too.
        for path in (tool.path, *linked_libraries(tool.path)):
            files[path] = files[Path(os.path.realpath(path))] = f"binary:{kind}"
    for spec in resolved.instances.values():
        if spec.tool is not None:  # its own executable: a new build is read by a reload
            for path in (spec.tool.path, Path(os.path.realpath(spec.tool.path))):
                files.setdefault(path, "config")
        for path in backend_for(spec.kind).watched(spec):
            files.setdefault(path, "model")
    return files


class FileWatch:
    """The watched files and the identities last seen; `run` reports the ones that moved."""

    def __init__(self, resolved: Resolved, quiet_wake: float = QUIET_WAKE_S) -> None:
        """`quiet_wake`: seconds without a change after which `run` wakes anyway."""
        self._quiet_ms = round(quiet_wake * 1000)
        self._rewatch = asyncio.Event()
        self._files: Watched = {}
        self._links: set[Path] = set()
        self._watch(resolved)
        self._ids = self.snapshot()

    def _watch(self, resolved: Resolved) -> None:
        self._config, self._files = resolved.path, watched(resolved)
        self._relink()

    def _relink(self) -> None:
        # The links on the way only wake the watch (what moved is told by the files), and
        # a swap may lead through other links from now on.
        old_dirs = self._dirs()
        self._links = {link for path in self._files for link in links(path)}
        if self._dirs() != old_dirs:
            self._rewatch.set()

    def _id(self, path: Path) -> FileId | None:
        # The config by its contents: a link swapped to the same text reloads nothing.
        return digest(path) if path == self._config else file_id(path)

    def snapshot(self) -> dict[Path, FileId | None]:
        """The identity of every watched file now."""
        return {path: self._id(path) for path in self._files}

    def follow(self, resolved: Resolved, before: dict[Path, FileId | None]) -> None:
        """A reload applied `resolved`: watch its files. Those known `before` it was read
        keep that identity, so a save that landed during the reload is still news."""
        old_dirs = self._dirs()
        self._watch(resolved)
        self._ids = {p: before[p] if p in before else self._id(p) for p in self._files}
        if self._dirs() != old_dirs:
            self._rewatch.set()

    def moved(self) -> Watched:
        """The watched files whose identity changed since last asked, with what they are."""
        self._relink()
        now = self.snapshot()
        moved = {p for p, fid in now.items() if fid != self._ids.get(p) and fid is not None}
        self._ids.update(now)
        return {p: self._files.get(p, "") for p in moved}

    def _wakes(self, path: str) -> bool:
        return Path(path) in self._files or Path(path) in self._links

    def _dirs(self) -> list[str]:
        places = {p.parent for p in self._files} | {p.parent for p in self._links}
        return sorted(str(d) for d in places if d.is_dir())

    async def run(self, stop: asyncio.Event, on_wake: Callable[[], Awaitable[None]]) -> None:
        """Call `on_wake` after each change in a watched directory, and after each quiet
        `quiet_wake` seconds, until `stop`; what decides is `moved()`, so a change made
        while a session was being set up is not lost."""
        # A session lasts until the set of watched directories changes.
        while not stop.is_set():
            session = asyncio.Event()
            self._rewatch.clear()
            async with asyncio.TaskGroup() as group:
                # Ends the session (awatch's stop_event) on `stop` or a rewatch; awaited
                # on the way out, whatever ended the session.
                ender = group.create_task(_first_of(stop, self._rewatch, then=session))
                try:
                    async for _ in watchfiles.awatch(
                        *self._dirs(),
                        watch_filter=lambda _change, path: self._wakes(path),
                        debounce=DEBOUNCE_MS,
                        # The Rust side wakes every `step` ms to check stop_event: a save's
                        # reload stays quick at little cost when idle.
                        step=50,
                        stop_event=session,
                        recursive=False,
                        rust_timeout=self._quiet_ms,
                        yield_on_timeout=True,
                    ):
                        await on_wake()
                finally:
                    ender.cancel()


async def _first_of(*events: asyncio.Event, then: asyncio.Event) -> None:
    try:
        await first_of(*(e.wait() for e in events))
    finally:
        then.set()
