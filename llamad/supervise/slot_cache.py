"""The prompt cache kept across processes: every slot that holds a prompt is saved
before llamad stops a llama-server on purpose, and restored into the next process of the
same instance once it is ready, before it is routed to.

The instance task calls `save` between deciding a stop and signalling it, and `restore`
between the first 200 of `/health` and RUNNING: one place for every planned stop (idle,
eviction, unload, reload, rolling upgrade, shutdown). A save that fails or runs past its
budget never holds up the stop; a file that does not fit is refused and removed.
`checkpoint` saves a running server's changed slots between requests (slot_checkpoints.py);
one lock per instance keeps it from crossing a stop's save or a restore. The request after
a restore says whether it paid (`served`, slot_verdicts.py): a model and build whose
restores reuse nothing stop being saved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from llamad.backends.llama_cache import cache_fit, dropped
from llamad.backends.local_http import Client
from llamad.backends.recurrent import recurrent
from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import Event, Ready, Record, State
from llamad.supervise import slot_files as files
from llamad.supervise import slot_http as http
from llamad.supervise import slot_room as room
from llamad.supervise.slot_restore import refused, restore_fitting
from llamad.supervise.slot_save import save_slot
from llamad.supervise.slot_verdicts import Verdicts

log = structlog.get_logger("llamad.cache")

# A save takes at most this long, and half the stop_timeout, before the stop goes on:
# with the default stop_timeout the whole stop stays inside the waits' 5 s margin.
SAVE_BUDGET_S = 10.0
RESTORE_BUDGET_S = http.REQUEST_TIMEOUT_S


class SlotCache:
    """Saves and restores the slots of the instances whose spec keeps a prompt cache."""

    def __init__(
        self,
        client: Client,
        max_bytes: int | None,
        restore_budget: float = RESTORE_BUDGET_S,
        verdicts: Verdicts | None = None,
    ) -> None:
        self.client = client
        self.restore_budget = restore_budget
        self.max_bytes = max_bytes
        # Whether restores pay, per model and build: a cache that does not is stopped.
        self.verdicts = verdicts or Verdicts()
        self._roots: dict[str, Path] = {}  # each instance's cache root, as last restored
        # What each instance's running process fits, seen when it became ready: a model
        # file replaced under a running server must not be recorded as what it holds.
        self._fits: dict[str, dict[str, Any]] = {}
        # Per instance, what each slot held when it was last saved (its last task and
        # length): a slot that has not changed since is not written again.
        self._marks: dict[str, dict[int, tuple[Any, Any]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def launchable(self, spec: InstanceSpec) -> InstanceSpec:
        """`spec` as it can be launched now: its save directory made, or the cache off
        for this process when it cannot be (llama-server refuses a missing one)."""
        if spec.prompt_cache is None:
            return spec
        try:
            spec.prompt_cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            refused(spec, "launch", _short(exc))
            return dropped(spec, f"cannot make {spec.prompt_cache}: {exc.strerror}")
        return spec

    async def before(self, spec: InstanceSpec, record: Record, event: Event) -> None:
        """Before the machine takes `event`: a process that just became ready gets its
        slots back while still STARTING, so nothing is routed to it until then."""
        if isinstance(event, Ready) and record.state is State.STARTING and event.pid == record.pid:
            await self.restore(spec)

    async def after(self, spec: InstanceSpec, before: Record, after: Record) -> None:
        """After the machine's step, before its actions: every stop llamad plans leaves
        RUNNING for STOPPING (a crash or a kill does not), and the signal waits for this."""
        if before.state is State.RUNNING and after.state is State.STOPPING:
            await self.save(spec)

    async def save(self, spec: InstanceSpec) -> None:
        """Save every slot of `spec`'s running server that holds a prompt and changed
        since it was last saved; never raises. `cache.stop_saved` says what the stop
        waited for: the whole step, and what it wrote."""
        if spec.prompt_cache is not None:
            t0 = time.perf_counter()
            budget = min(SAVE_BUDGET_S, spec.knobs.stop_timeout / 2)
            done = Written()
            await _bounded(spec, "save", budget, self._save(spec, spec.prompt_cache, "stop", done))
            ms = round((time.perf_counter() - t0) * 1000, 1)
            log.info("cache.stop_saved", instance=spec.name, ms=ms, slots=done.slots,
                     bytes=done.bytes)  # fmt: skip
        self._fits.pop(spec.name, None)
        self._marks.pop(spec.name, None)

    async def checkpoint(self, spec: InstanceSpec, least: int = 0) -> Written:
        """Save the slots of `spec`'s running server that changed since they were last
        saved and hold at least `least` tokens, beside its requests (an idle slot only);
        never raises. A short prompt is cheaper to evaluate again than to save: the save
        would stall the server's other requests for nothing."""
        done = Written()
        if spec.prompt_cache is not None:
            work = self._save(spec, spec.prompt_cache, "turn", done, least)
            await _bounded(spec, "save", SAVE_BUDGET_S, work)
        return done

    async def restore(self, spec: InstanceSpec) -> None:
        """Restore the saved slots that fit `spec`'s new process; never raises."""
        if spec.prompt_cache is not None:
            work = self._restore(spec, spec.prompt_cache)
            await _bounded(spec, "restore", self.restore_budget, work)

    def served(self, instance: str, cached: int | None, evaluated: int | None) -> None:
        """`instance` answered a request (its prompt's tokens taken from the cache and
        evaluated): the first after a restore judges it; a cache stopped by it loses its
        files, which no restore would use."""
        root = self._roots.get(instance)
        if root is not None and self.verdicts.served(instance, cached, evaluated, root):
            files.clear(root, instance)

    def _lock(self, spec: InstanceSpec) -> asyncio.Lock:
        return self._locks.setdefault(spec.name, asyncio.Lock())

    async def _save(
        self, spec: InstanceSpec, directory: Path, cause: str, done: Written, least: int = 0
    ) -> None:
        async with self._lock(spec):
            await self._save_changed(spec, directory, cause, done, least)

    async def _save_changed(
        self, spec: InstanceSpec, directory: Path, cause: str, done: Written, least: int
    ) -> None:
        client = self.client
        fit = self._fits.get(spec.name) or cache_fit(spec, await http.get(client, spec, "/props"))
        if self.verdicts.stopped(spec.name) is not None:
            return  # its restores reuse nothing: writing them is all cost
        slots = await http.get(client, spec, "/slots")
        marks = self._marks.setdefault(spec.name, {})
        changed = [
            s
            for s in slots
            if isinstance(s, dict)
            and int(s.get("n_prompt_tokens") or 0) >= max(least, 1)
            and (_mark(s) != marks.get(int(s["id"])) or not files.has(directory, int(s["id"])))
        ]
        held = [s for s in changed if not s.get("is_processing")]
        done.busy = len(held) < len(changed)
        if not held:
            return
        need = room.need(directory, (int(s.get("n_prompt_tokens") or 0) for s in held))
        if (why := room.no_room(directory, need)) is not None:
            refused(spec, "save", why)
            return
        for slot in held:
            number = int(slot["id"])
            seconds, size = await save_slot(self.client, spec, directory, number, fit, cause)
            done.seconds += seconds
            if size:
                marks[number] = _mark(slot)
                done.slots, done.bytes = done.slots + 1, done.bytes + size
        # The root the instance saves under now (`cache_dir` as its spec has it, a reload
        # may have moved it), not the one the daemon started with.
        for gone in files.prune(directory.parent, self.max_bytes):
            log.info("cache.pruned", instance=gone.instance, slot=gone.slot, bytes=gone.bytes)

    async def _restore(self, spec: InstanceSpec, directory: Path) -> None:
        async with self._lock(spec):
            # A new process: what the last one's slots held says nothing of its own.
            self._marks.pop(spec.name, None)
            files.drop_parts(directory)  # the last process's saves never made whole
            props = await http.get(self.client, spec, "/props")
            fit = self._fits[spec.name] = cache_fit(spec, props)
            root = self._roots[spec.name] = directory.parent
            self.verdicts.fits(spec.name, fit, root, recurrent(spec.model))
            if self.verdicts.stopped(spec.name) is not None:
                files.clear(root, spec.name)
                return
            total = int(props.get("total_slots", 0))
            for tokens, ms in await restore_fitting(self.client, spec, directory, fit, total):
                self.verdicts.restored(spec.name, tokens, ms)


@dataclass
class Written:
    """What one save wrote; how long llama-server was kept busy writing (its own
    `save_ms`, else the request's time); whether it left a changed slot that was busy."""

    slots: int = 0
    bytes: int = 0
    seconds: float = 0.0
    busy: bool = False


async def _bounded(
    spec: InstanceSpec, op: str, budget: float, work: Coroutine[Any, Any, None]
) -> None:
    """Run `work` for at most `budget` seconds. Whatever goes wrong is logged and no
    further: the stop or the start it comes before must happen anyway."""
    try:
        async with asyncio.timeout(budget):
            await work
    except TimeoutError:
        refused(spec, op, f"not done within {budget:g}s")
    except Exception as exc:
        refused(spec, op, _short(exc))


def _mark(slot: dict[str, Any]) -> tuple[Any, Any]:
    """What a slot of `GET /slots` holds, as far as a save goes: its last task and length."""
    return slot.get("id_task"), slot.get("n_prompt_tokens")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]
