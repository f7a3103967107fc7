"""The model descriptions of /api/tags, /api/show and /api/ps, read from GGUF headers.

Headers are read in a worker thread (the first read of a large file takes a moment) and
cached by `gguf_meta`; nothing here waits on a model load.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import structlog

from llamad.backends.gguf_meta import GGUFMeta, parameter_size, read_gguf_meta
from llamad.gateway.ollama.durations import NEVER, rfc3339
from llamad.gateway.ollama.port import ModelView

log = structlog.get_logger("llamad.gateway.ollama")

LATEST = ":latest"


def tagged(name: str) -> str:
    """The name as Ollama clients expect it: with a tag (`:latest` when it has none)."""
    return name if ":" in name else name + LATEST


async def header(view: ModelView) -> GGUFMeta | None:
    """The model's GGUF header facts, or None when it has no readable local file."""
    if view.model_path is None:
        return None
    try:
        return await asyncio.to_thread(read_gguf_meta, view.model_path)
    except (OSError, ValueError) as exc:
        log.warning(
            "ollama.gguf_unreadable", model=view.name, path=str(view.model_path), error=str(exc)
        )
        return None


def digest(view: ModelView, meta: GGUFMeta | None) -> str:
    """A stable sha256 per model: its name and its file's identity (not its bytes, which
    would mean hashing gigabytes)."""
    ident = [view.name, str(view.model_path)]
    if meta is not None:
        ident += [str(meta.size_bytes), str(meta.mtime_ns)]
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


def _size(view: ModelView, meta: GGUFMeta | None) -> int:
    if meta is not None:
        return meta.size_bytes
    return view.size_bytes or 0


def tag_entry(view: ModelView, meta: GGUFMeta | None) -> dict[str, Any]:
    """One model of /api/tags."""
    name = tagged(view.name)
    return {
        "name": name,
        "model": name,
        "modified_at": rfc3339(meta.mtime_ns / 1e9 if meta else 0.0),
        "size": _size(view, meta),
        "digest": digest(view, meta),
        "details": details(meta),
    }


def ps_entry(view: ModelView, meta: GGUFMeta | None) -> dict[str, Any]:
    """One loaded model of /api/ps."""
    name = tagged(view.name)
    size = view.size_bytes or _size(view, meta)
    return {
        "name": name,
        "model": name,
        "size": size,
        # llama-server does not say how much sits in VRAM; Ollama's clients only show it.
        "size_vram": size,
        "digest": digest(view, meta),
        "details": details(meta),
        "expires_at": rfc3339(view.expires_at if view.expires_at is not None else NEVER),
        "context_length": view.ctx_size or (meta.context_length if meta else 0) or 0,
    }


def capabilities(view: ModelView, meta: GGUFMeta | None) -> list[str]:
    """What the model can do, in Ollama's words."""
    caps = []
    embedding_only = meta is not None and meta.pooling_type is not None and not meta.chat_template
    if not embedding_only:
        caps.append("completion")
    if meta is not None and meta.chat_template and "tools" in meta.chat_template:
        caps.append("tools")
    if meta is not None and meta.pooling_type is not None:
        caps.append("embedding")
    if view.mmproj:
        caps.append("vision")
    if meta is not None and meta.has_fim:
        caps.append("insert")
    return caps


def _parameters(view: ModelView, meta: GGUFMeta | None) -> str:
    # Ollama prints its Modelfile parameters one per line; Continue reads num_ctx and stop.
    lines = []
    num_ctx = view.ctx_size or (meta.context_length if meta else None)
    if num_ctx:
        lines.append(f"num_ctx {num_ctx}")
    for stop in meta.stop_tokens if meta else ():
        lines.append(f"stop {json.dumps(stop)}")
    return "\n".join(lines)


def _template(meta: GGUFMeta | None) -> str:
    template = (meta.chat_template if meta else None) or ""
    if meta is not None and meta.has_fim:
        # Continue offers fill-in-the-middle only when the template mentions .Suffix;
        # /api/generate serves `suffix` through llama-server's /infill.
        template = "{{- if .Suffix }}{{ .Prompt }}{{ .Suffix }}{{ end }}\n" + template
    return template


def show(view: ModelView, meta: GGUFMeta | None) -> dict[str, Any]:
    """The /api/show document."""
    info: dict[str, Any] = dict(meta.scalars) if meta else {}
    # Clients read these two even when the header lacks them.
    info.setdefault("general.architecture", meta.architecture if meta else "unknown")
    info.setdefault("general.basename", (meta.name if meta else None) or view.name)
    if meta is not None:
        info["general.parameter_count"] = meta.parameter_count
        if meta.context_length is None and view.ctx_size:
            info[f"{meta.architecture}.context_length"] = view.ctx_size
    info.pop("tokenizer.chat_template", None)  # it is `template`
    return {
        "license": "",
        "modelfile": f"# served by llamad from {view.model_path}\nFROM {view.model_path}\n",
        "parameters": _parameters(view, meta),
        "template": _template(meta),
        "details": details(meta),
        "model_info": info,
        "capabilities": capabilities(view, meta),
        "modified_at": rfc3339(meta.mtime_ns / 1e9 if meta else 0.0),
    }
