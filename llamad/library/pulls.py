"""Pulls under way: one per model name (a second request for it follows the first), each
run in the daemon's own task group, its progress relayed to every follower, and the
library reloaded when it ends, so the model is routable before `success` is said."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from llamad.library import remove
from llamad.library.hf_pull import pull_hf
from llamad.library.listing import Library
from llamad.library.progress import PullCancelled, PullError
from llamad.library.pull_feed import Event, Pull
from llamad.library.pulled import remember
from llamad.library.refs import HfRef, OllamaRef, RefError, parse
from llamad.library.remove import RemoveError
from llamad.library.scan import OLLAMA_PULLS

log = structlog.get_logger("llamad.library")

__all__ = ["Pull", "Pulls"]


class Pulls:
    """Starts pulls and keeps them until they end; `run()` holds their tasks."""

    def __init__(
        self,
        library: Callable[[], Library | None],
        reload: Callable[[], Awaitable[object]],
        unload: Callable[[str], Awaitable[None]],
    ) -> None:
        """`unload` stops an instance once its requests in flight have ended (the
        gateway's unload), so `remove` never deletes a file in use."""
        self.library, self.reload, self.unload = library, reload, unload
        self.active: dict[str, Pull] = {}
        self._removing: set[str] = set()  # the keys of models being removed
        self._group: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Hold the pulls' task group until `stop`; pulls under way are then cancelled
        (their partial files stay, and the next pull resumes them)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                await stop.wait()
            finally:
                self._group = None
                for task in self._tasks:
                    task.cancel()

    def start(self, ref: str) -> Pull:
        """The pull of `ref`, started now or already under way. Raises RefError for a
        name that is no model reference, PullError when pulls cannot run."""
        source = parse(ref)
        lib = self.library()
        if lib is None:
            raise PullError("the library is off ([library] enabled = false, or no [gateway])")
        if self._group is None:
            raise PullError("llamad is starting or stopping; pull again in a moment")
        if (pull := self.active.get(source.key)) is not None:
            return pull
        if source.key in self._removing:
            raise PullError(f"{source.name} is being removed; pull it again once that ends")
        pull = self.active[source.key] = Pull(source.name)
        task = self._group.create_task(self._pull(pull, source, lib), name=f"pull-{source.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return pull

    def downloading(self, name: str) -> Pull | None:
        """The pull under way for model `name` (any name the pulled model will answer
        to: `hf.co/` or not, `:latest` or no quant for Q4_K_M, the quant in any case), if
        any. Costs a parse: asked only for a name no model answers to yet."""
        try:
            key = parse(name).key
        except RefError:
            return None
        pull = self.active.get(key)
        return pull if pull is not None and not pull.done else None

    async def remove(self, name: str) -> dict[str, Any]:
        """Delete the pulled model `name`: unloaded first, then its files, then the
        library reloaded without it. RemoveError says why not."""
        lib = self.library()
        if lib is None:
            raise RemoveError("the library is off ([library] enabled = false, or no [gateway])")
        plan = remove.plan(lib, name)
        key = _key(plan.model.name)
        # Checked and marked in one step: a pull of it cannot start while its files go.
        pull = self.active.get(key)
        if (pull is not None and not pull.done) or key in self._removing:
            raise remove.Busy(f"{plan.model.name} is being pulled or removed; try once that ends")
        self._removing.add(key)
        try:
            if plan.instance is not None:
                await self.unload(plan.instance)
            freed = await asyncio.to_thread(remove.delete, plan, lib.pull_dir)
        finally:
            self._removing.discard(key)
        log.info("library.removed", model=plan.model.name, freed_bytes=freed)
        # An invalid config file refuses the reload (config.rejected says so); the files
        # are gone all the same, and the folders' watch reloads once the file is valid.
        with contextlib.suppress(Exception):
            await self.reload()
        return {
            "model": plan.model.name,
            "deleted": [str(f) for f in plan.files],
            "freed_bytes": freed,
        }

    async def _pull(self, pull: Pull, source: HfRef | OllamaRef, lib: Library) -> None:
        loop = asyncio.get_running_loop()

        def report(event: Event) -> None:  # from the download's thread
            if pull.cancelled.is_set():
                raise PullCancelled(pull.name)  # unwinds the download where it is
            loop.call_soon_threadsafe(pull.publish, event)

        try:
            log.info("library.pull_started", model=pull.name)
            await asyncio.to_thread(_download, source, lib, report)
            await asyncio.sleep(0)  # the download's last lines go first
            await self.reload()
            if (found := self._served(pull.name)) is not None:
                raise PullError(found)
            log.info("library.pulled", model=pull.name)
            pull.publish({"status": "success"}, end=True)
        except PullCancelled:
            error = f"{pull.name}: pull cancelled (nobody was waiting for it any more)"
            log.info("library.pull_failed", model=pull.name, error=error)
            pull.publish({"error": error}, end=True)
        except (PullError, OSError, ValueError) as exc:
            log.warning("library.pull_failed", model=pull.name, error=str(exc))
            pull.publish({"error": str(exc)}, end=True)
        except Exception as exc:  # a pull must end, and say why, whatever went wrong
            log.exception("library.pull_failed", model=pull.name)
            pull.publish({"error": f"pull failed: {type(exc).__name__}: {exc}"}, end=True)
        finally:
            self.active.pop(source.key, None)

    def _served(self, name: str) -> str | None:
        """None when `name` is routable now, else why not."""
        lib = self.library()
        model = lib.find(name) if lib else None
        if model is None:
            return f"{name}: pulled, but the library does not list it (see llamad's log)"
        if model.problem:
            return f"{name}: pulled, but it cannot be served: {model.problem}"
        return None


def _key(name: str) -> str:
    """The pull key of a library model's name (its own name when it is no pull's)."""
    try:
        return parse(name).key
    except RefError:
        return name


def _download(source: HfRef | OllamaRef, lib: Library, report: Callable[[Event], None]) -> None:
    if isinstance(source, HfRef):
        remember(lib.pull_dir, source.repo, pull_hf(source, report))
    else:
        # Loaded by the first pull: an idle daemon keeps no HTTP client stack for it.
        from llamad.library.ollama_pull import pull_ollama

        pull_ollama(source, lib.registry, Path(lib.pull_dir) / OLLAMA_PULLS, report)
