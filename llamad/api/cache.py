"""The prompt cache on the control API: `GET /v1/cache` (every saved slot per model, its
size and age, and per model what its restores reused) and `DELETE /v1/cache[/NAME]` (all
of them, or one model's)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llamad.backends.spec import InstanceSpec
from llamad.supervise import slot_files
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.slot_cache import SlotCache

Endpoint = Callable[[Request], Awaitable[Response]]


def cache_state(spec: InstanceSpec) -> dict[str, Any]:
    """Whether `spec`'s prompt cache outlives its process, why not when it does not, and
    for a sliding-window model the bytes the full-size window cache adds."""
    return {
        "kept": spec.prompt_cache is not None,
        "note": spec.cache_note,
        "full_window_bytes": spec.window_cost,
    }


def cache_figures(spec: InstanceSpec, cache: SlotCache | None) -> dict[str, Any]:
    """Everything status, `llamactl cache`, `/metrics` and the page say of `spec`'s
    prompt cache: whether it is kept and why not, the bytes its files hold, and what its
    restores did (`restores`: counts, tokens saved, restore times, why they stopped the
    saves), the stop reason replacing the note while the saves are stopped."""
    doc = cache_state(spec)
    doc["bytes"] = slot_files.held_bytes(spec.prompt_cache) if spec.prompt_cache else 0
    judged = cache.verdicts.of(spec.name) if cache is not None else None
    doc["restores"] = judged
    if judged is not None and judged["stopped"] is not None and spec.prompt_cache is not None:
        doc |= {"kept": False, "note": judged["stopped"]}
    return doc


def cache_routes(state: DaemonState) -> list[tuple[str, Endpoint, list[str]]]:
    """The prompt cache's control routes, over the directory the daemon's config names."""

    async def listing(request: Request) -> Response:
        root = state.resolved.daemon.cache_dir
        now = time.time()
        saved = [s.to_dict(now) for s in slot_files.everything(root)]
        held = sum(s["bytes"] for s in saved)
        cache = state.supervisor.runtime.cache
        models = {
            name: {**judged, "bytes": figures["bytes"]}
            for name, inst in sorted(state.supervisor.instances.items())
            if (judged := (figures := cache_figures(inst.spec, cache))["restores"]) is not None
        }
        # Why an instance's slots are not saved, and what keeping them would cost.
        notes = [
            {"model": name, **cache_state(spec)}
            for name, spec in sorted(state.resolved.instances.items())
            if spec.cache_note is not None or spec.window_cost is not None
        ]
        doc = {"dir": str(root), "bytes": held, "saved": saved, "notes": notes, "models": models}
        return JSONResponse(doc)

    async def clear(request: Request) -> Response:
        model = request.path_params.get("name")
        gone = slot_files.clear(state.resolved.daemon.cache_dir, model)
        return JSONResponse({"removed": len(gone), "freed_bytes": sum(s.bytes for s in gone)})

    return [
        ("/v1/cache", listing, ["GET"]),
        ("/v1/cache", clear, ["DELETE"]),
        ("/v1/cache/{name:path}", clear, ["DELETE"]),
    ]
