"""The prompt cache kept across processes: every slot that holds a prompt is saved
before llamad stops a llama-server on purpose, and restored into the next process of the
same instance once it is ready, before it is routed to.

The instance task calls `save` between deciding a stop and signalling it, and `restore`
between the first 200 of `/health` and RUNNING: one place for every planned stop (idle,
eviction, unload, reload, rolling upgrade, shutdown). A save that fails or runs past its
budget never holds up the stop; a file that does not fit is refused and removed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog

from llamad.backends.llama_cache import cache_fit, dropped
from llamad.backends.local_http import Client
from llamad.backends.probes import server_url
from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import Event, Ready, Record, State
from llamad.supervise import slot_files as files

log = structlog.get_logger("llamad.cache")

# A save takes at most this long, and half the stop_timeout, before the stop goes on:
# with the default stop_timeout the whole stop stays inside the waits' 5 s margin.
SAVE_BUDGET_S = 10.0
RESTORE_BUDGET_S = 60.0


class SlotCache:
    """Saves and restores the slots of the instances whose spec keeps a prompt cache."""

    def __init__(self, client: Client, root: Path, max_bytes: int | None) -> None:
        self.client = client
        self.root = root
        self.max_bytes = max_bytes
        # What each instance's running process fits, seen when it became ready: a model
        # file replaced under a running server must not be recorded as what it holds.
        self._fits: dict[str, dict[str, Any]] = {}

    def launchable(self, spec: InstanceSpec) -> InstanceSpec:
        """`spec` as it can be launched now: its save directory made, or the cache off
        for this process when it cannot be (llama-server refuses a missing one)."""
        if spec.prompt_cache is None:
            return spec
        try:
            spec.prompt_cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            _refused(spec, "launch", _short(exc))
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
        """Save every slot of `spec`'s running server that holds a prompt; never raises."""
        if spec.prompt_cache is not None:
            budget = min(SAVE_BUDGET_S, spec.knobs.stop_timeout / 2)
            await _bounded(spec, "save", budget, self._save(spec, spec.prompt_cache))
        self._fits.pop(spec.name, None)

    async def restore(self, spec: InstanceSpec) -> None:
        """Restore the saved slots that fit `spec`'s new process; never raises."""
        if spec.prompt_cache is not None:
            work = self._restore(spec, spec.prompt_cache)
            await _bounded(spec, "restore", RESTORE_BUDGET_S, work)

    async def _save(self, spec: InstanceSpec, directory: Path) -> None:
        fit = self._fits.get(spec.name) or cache_fit(spec, await self._get(spec, "/props"))
        slots = await self._get(spec, "/slots")
        held = [
            s
            for s in slots
            if isinstance(s, dict) and s.get("n_prompt_tokens") and not s.get("is_processing")
        ]
        if not held:
            return
        if (why := files.no_room(directory)) is not None:
            _refused(spec, "save", why)
            return
        for slot in held:
            number = int(slot["id"])
            t0 = time.perf_counter()
            status, body = await self._post(spec, number, "save", files.data_name(number))
            tokens = int(body.get("n_saved", 0)) if status == 200 else 0
            if status != 200 or tokens == 0:
                files.remove(directory, number)
                if status != 200:
                    _refused(spec, "save", _error(status, body), slot=number)
                continue
            size = int(body.get("n_written", 0))
            files.record(directory, number, fit, tokens, size)
            ms = round((time.perf_counter() - t0) * 1000, 1)
            log.info(
                "cache.saved", instance=spec.name, slot=number, tokens=tokens, bytes=size, ms=ms
            )
        for gone in files.prune(self.root, self.max_bytes):
            log.info("cache.pruned", instance=gone.instance, slot=gone.slot, bytes=gone.bytes)

    async def _restore(self, spec: InstanceSpec, directory: Path) -> None:
        props = await self._get(spec, "/props")
        fit = self._fits[spec.name] = cache_fit(spec, props)
        total = int(props.get("total_slots", 0))
        for item in files.saved(directory):
            differs = sorted(
                k for k in fit.keys() | item.fit.keys() if fit.get(k) != item.fit.get(k)
            )
            if item.slot >= total:
                differs.append(f"slot {item.slot} of {total}")
            if differs:
                files.remove(directory, item.slot)
                _refused(spec, "restore", "differs: " + ", ".join(differs), slot=item.slot)
                continue
            t0 = time.perf_counter()
            status, body = await self._post(spec, item.slot, "restore", item.data.name)
            if status != 200:
                files.remove(directory, item.slot)
                _refused(spec, "restore", _error(status, body), slot=item.slot)
                continue
            files.touch(item)
            ms = round((time.perf_counter() - t0) * 1000, 1)
            tokens = body.get("n_restored")
            log.info(
                "cache.restored",
                instance=spec.name,
                slot=item.slot,
                tokens=tokens,
                bytes=item.bytes,
                ms=ms,
            )

    async def _get(self, spec: InstanceSpec, path: str) -> Any:
        reply = await self.client.request(
            "GET", _url(spec, path), RESTORE_BUDGET_S, None, _auth(spec)
        )
        if reply.status != 200:
            raise ValueError(f"GET {path}: HTTP {reply.status}")
        return json.loads(reply.body)

    async def _post(
        self, spec: InstanceSpec, slot: int, action: str, name: str
    ) -> tuple[int, dict[str, Any]]:
        url = _url(spec, f"/slots/{slot}?action={action}")
        body = json.dumps({"filename": name}).encode()
        reply = await self.client.request("POST", url, RESTORE_BUDGET_S, body, _auth(spec))
        try:
            answer = json.loads(reply.body)
        except ValueError:
            answer = {}
        return reply.status, answer if isinstance(answer, dict) else {}


async def _bounded(
    spec: InstanceSpec, op: str, budget: float, work: Coroutine[Any, Any, None]
) -> None:
    """Run `work` for at most `budget` seconds. Whatever goes wrong is logged and no
    further: the stop or the start it comes before must happen anyway."""
    try:
        async with asyncio.timeout(budget):
            await work
    except TimeoutError:
        _refused(spec, op, f"not done within {budget:g}s")
    except Exception as exc:
        _refused(spec, op, _short(exc))


def _url(spec: InstanceSpec, path: str) -> str:
    return server_url(spec.probe_host, spec.port, path)


def _auth(spec: InstanceSpec) -> dict[str, str]:
    return {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}


def _error(status: int, body: dict[str, Any]) -> str:
    err = body.get("error")
    message = err.get("message") if isinstance(err, dict) else None
    return f"HTTP {status}" + (f": {message}" if message else "")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def _refused(spec: InstanceSpec, op: str, reason: str, **fields: Any) -> None:
    log.warning("cache.refused", instance=spec.name, op=op, reason=reason, **fields)
