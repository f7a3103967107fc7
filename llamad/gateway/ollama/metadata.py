"""The model descriptions of /api/tags, /api/show and /api/ps, read from GGUF headers.

Headers are read in worker threads and cached by `gguf_meta`; nothing here waits on a
model load. A listing waits at most LISTING_BUDGET for headers read the first time (Raycast
gives up at 10 s): the rest go on reading and show their details on the next call, while
names, sizes and digests come from the file's stat and never change in between.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import structlog

from llamad.backends.gguf_meta import (
    GGUFMeta,
    cached_gguf_meta,
    parameter_size,
    read_gguf_meta,
)
from llamad.gateway.admission.memory import weights
from llamad.gateway.models.tags import tagged
from llamad.gateway.ollama import capabilities
from llamad.gateway.ollama.durations import NEVER, rfc3339
from llamad.gateway.ollama.port import ModelView

log = structlog.get_logger("llamad.gateway.ollama")

LISTING_BUDGET = 3.0

# Header reads that outlived a listing's budget; held here so they finish into the cache.
_pending: set[asyncio.Task[GGUFMeta | None]] = set()


async def header(view: ModelView) -> GGUFMeta | None:
    """The model's GGUF header facts, or None when it has no readable local file."""
    if view.model_path is None or view.model_path.is_dir():
        return None  # a hub or URL model, or an MLX directory: no GGUF header
    cached = cached_gguf_meta(view.model_path)
    if cached is not None:
        return cached
    try:
        return await asyncio.to_thread(read_gguf_meta, view.model_path)
    except (OSError, ValueError) as exc:
        log.warning(
            "ollama.gguf_unreadable", model=view.name, path=str(view.model_path), error=str(exc)
        )
        return None


async def headers(
    views: Sequence[ModelView], budget: float = LISTING_BUDGET
) -> list[GGUFMeta | None]:
    """The headers of `views`, None for those not read within `budget` seconds."""
    tasks = [asyncio.ensure_future(header(v)) for v in views]
    await asyncio.sleep(0)  # cached headers finish here without a thread
    if tasks and not all(t.done() for t in tasks):
        await asyncio.wait(tasks, timeout=budget)
    for task in tasks:
        if not task.done():
            _pending.add(task)
            task.add_done_callback(_pending.discard)
    return [t.result() if t.done() else None for t in tasks]


def _stat(view: ModelView) -> os.stat_result | None:
    try:
        return os.stat(view.model_path.expanduser()) if view.model_path is not None else None
    except OSError:
        return None


def digest(view: ModelView) -> str:
    """A stable sha256 per model: its name and its file's identity (path, size, mtime), not
    its bytes, which would mean hashing gigabytes."""
    ident = [view.name, str(view.model_path), view.host or ""]
    st = _stat(view)
    if st is not None:
        ident += [str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(ident).encode()).hexdigest()


def details(meta: GGUFMeta | None) -> dict[str, Any]:
    """Ollama's `details` object."""
    if meta is None:
        family, params, quant = "unknown", "unknown", "unknown"
    else:
        family = meta.architecture
        params = meta.size_label or parameter_size(meta.parameter_count)
        quant = meta.quantization
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": params,
        "quantization_level": quant,
    }


def _file_size(view: ModelView) -> int:
    st = _stat(view)
    if st is None or view.model_path is None:
        return view.size_bytes or 0
    try:  # every part of a split model, as Ollama's size is the whole model's
        return weights(view.model_path.expanduser())
    except OSError:
        return st.st_size


def _modified_at(view: ModelView) -> str:
    st = _stat(view)
    return rfc3339(st.st_mtime_ns / 1e9 if st is not None else 0.0)


def tag_entry(
    view: ModelView, meta: GGUFMeta | None, listed: str | None = None, alias_of: str | None = None
) -> dict[str, Any]:
    """One model of /api/tags: `view` under its own name, or `listed` (an alias of the
    instance `alias_of`, which then says so)."""
    name = tagged(listed or view.name)
    entry: dict[str, Any] = {
        "name": name,
        "model": name,
        "modified_at": _modified_at(view),
        "size": _file_size(view),
        "digest": digest(view),
        "details": details(meta),
    }
    if view.host:  # a `[fleet]` peer serves it (`[gateway] fleet = true`)
        entry["host"] = view.host
    if alias_of:
        entry["llamad"] = {"alias_of": tagged(alias_of)}
    return entry


def ps_entry(view: ModelView, meta: GGUFMeta | None, num_ctx: int | None) -> dict[str, Any]:
    """One loaded model of /api/ps; `num_ctx` is the context each request gets."""
    name = tagged(view.name)
    size = view.size_bytes or _file_size(view)
    return {
        "name": name,
        "model": name,
        "size": size,
        # llama-server does not say how much sits in VRAM; Ollama's clients only show it.
        "size_vram": size,
        "digest": digest(view),
        "details": details(meta),
        "expires_at": rfc3339(view.expires_at if view.expires_at is not None else NEVER),
        "context_length": num_ctx or 0,
    }


def _parameters(view: ModelView, num_ctx: int | None, meta: GGUFMeta | None) -> str:
    # Ollama prints its Modelfile parameters one per line; Continue reads num_ctx and stop.
    lines = []
    if num_ctx:
        lines.append(f"num_ctx {num_ctx}")
    stops = [*(meta.stop_tokens if meta else ()), *(view.prompt.stop if view.prompt else ())]
    for stop in dict.fromkeys(stops):
        lines.append(f"stop {json.dumps(stop)}")
    return "\n".join(lines)


def _template(view: ModelView, meta: GGUFMeta | None) -> str:
    # A store model shows its store's template (Ollama's Go template), as Ollama does.
    own = view.prompt.template if view.prompt else None
    template = own if own is not None else capabilities.template(view, meta)
    if meta is not None and meta.has_fim and ".Suffix" not in template:
        # Continue offers fill-in-the-middle only when the template mentions .Suffix;
        # /api/generate serves `suffix` through llama-server's /infill.
        template = "{{- if .Suffix }}{{ .Prompt }}{{ .Suffix }}{{ end }}\n" + template
    return template


def show(view: ModelView, meta: GGUFMeta | None, num_ctx: int | None) -> dict[str, Any]:
    """The /api/show document; `num_ctx` is the context each request gets (`model_info`
    keeps the trained one, as Ollama's does)."""
    # Arrays stay out, as in Ollama's answer without `verbose`.
    info: dict[str, Any] = {
        k: v for k, v in (meta.scalars if meta else {}).items() if not isinstance(v, list)
    }
    # Clients read these two even when the header lacks them.
    info.setdefault("general.architecture", meta.architecture if meta else "unknown")
    info.setdefault("general.basename", (meta.name if meta else None) or view.name)
    if meta is not None:
        info["general.parameter_count"] = meta.parameter_count
        if meta.context_length is None and view.ctx_size:
            info[f"{meta.architecture}.context_length"] = view.ctx_size
    info.pop("tokenizer.chat_template", None)  # it is `template`
    doc = {
        "license": "",
        # Its name, never its path: answers through the gateway name no files.
        "modelfile": f"# served by llamad\nFROM {view.name}\n",
        "parameters": _parameters(view, num_ctx, meta),
        "template": _template(view, meta),
        "details": details(meta),
        "model_info": info,
        "capabilities": capabilities.capabilities(view, meta),
        "modified_at": _modified_at(view),
    }
    if view.prompt is not None and view.prompt.system:
        doc["system"] = view.prompt.system  # as Ollama's, only when the model has one
    return doc
