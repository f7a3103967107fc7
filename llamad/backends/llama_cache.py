"""How a llama-server instance keeps its prompt cache across processes: the launch it
needs (`--slot-save-path`, the full-size sliding-window cache where its cost is small or
chosen), or why it cannot."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from llamad.backends.catalog import Catalog
from llamad.backends.gguf_meta import header_of
from llamad.backends.kv_cache import Layout, full_window_adds, kv_bytes, kv_shape
from llamad.backends.spec import InstanceSpec

SAVE_FLAG = "--slot-save-path"
SWA_FULL = "LLAMA_ARG_SWA_FULL"
_TRUE = ("on", "enabled", "true", "1")
# By default a model never needs more than this much of the memory llama-server alone
# would use with the same settings: past it the full-size window cache is the user's choice.
MAX_WINDOW_RATIO = 1.1
# Settings that say how a server runs, never what its KV cache holds: a reload that
# changes only these keeps the saved slots. Any other (RoPE, adapters, the slot count,
# a flag llamad does not know) refuses them; the context per slot, the cache types, the
# model file and the build are checked by name as well.
_NEUTRAL = frozenset(
    "LLAMA_ARG_" + k
    for k in (
        "ALIAS", "HOST", "PORT", "API_KEY", "API_KEY_FILE", "SSL_KEY_FILE", "SSL_CERT_FILE",
        "THREADS", "THREADS_BATCH", "THREADS_HTTP", "TIMEOUT", "CACHE_RAM",
        "CTX_SIZE",  # what a slot gets of it is checked by name; the slot count is not
        # neutral: llama-server refuses a file saved with another (measured)
        "ENDPOINT_METRICS", "ENDPOINT_SLOTS", "ENDPOINT_PROPS", "WEBUI", "NO_WEBUI",
        "CHAT_TEMPLATE", "CHAT_TEMPLATE_FILE", "JINJA", "N_PREDICT", "CACHE_REUSE",
        "N_GPU_LAYERS", "DEVICE", "SPLIT_MODE", "TENSOR_SPLIT", "MAIN_GPU", "RPC",
        "BATCH", "UBATCH", "MLOCK", "NO_MMAP", "CONT_BATCHING", "NO_CONT_BATCHING",
    )
)  # fmt: skip


def sliding_window(model: Path | None) -> int | None:
    """The GGUF's `<arch>.attention.sliding_window`, or None (none, or unreadable)."""
    meta = header_of(model)
    if meta is None:
        return None
    value = meta.scalars.get(f"{meta.architecture}.attention.sliding_window")
    if isinstance(value, list):
        value = max(value, default=0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def keep_cache(spec: InstanceSpec, catalog: Catalog) -> InstanceSpec:
    """`spec` launched so its slots can be saved and restored, or with the cache off and
    `cache_note` saying why. A spec with the cache turned off is returned unchanged."""
    if spec.prompt_cache is None:
        return spec
    if catalog.flag(SAVE_FLAG) is None:
        return _without(spec, "this llama-server has no --slot-save-path")
    if any(a.split("=", 1)[0] == SAVE_FLAG for a in spec.args):
        return _without(spec, "args set --slot-save-path: llamad leaves those files alone")
    settings = dict(spec.settings)
    if sliding_window(spec.model) is not None:
        # A restored sliding-window slot is evaluated again in full unless the whole
        # window cache is kept (measured on Gemma 3), which costs memory: unless the
        # user chose that cost, the slots are saved only where it is small.
        cost = window_cost(spec)
        adds = None if cost is None else cost[0]
        chosen = spec.cache_swa_full or settings.get(SWA_FULL, "") in _TRUE
        if cost is not None and not chosen and cost[1] > MAX_WINDOW_RATIO:
            return _without(spec, _costly(*cost), adds)
        if catalog.lookup(SWA_FULL) is None:
            return _without(spec, "sliding-window model and this llama-server has no --swa-full")
        settings[SWA_FULL] = "true"
        spec = dataclasses.replace(spec, window_cost=adds)
    args = (*spec.args, SAVE_FLAG, str(spec.prompt_cache))
    return dataclasses.replace(spec, settings=tuple(sorted(settings.items())), args=args)


def window_cost(spec: InstanceSpec) -> tuple[int, float] | None:
    """The bytes the full-size window cache adds to `spec`, and the memory it then needs
    over what llama-server alone needs with the same settings (weights and KV cache);
    None when its model has no sliding window, or a header llamad cannot size."""
    meta = header_of(spec.model)
    if meta is None:
        return None
    shape = kv_shape(meta)
    if shape is None or not shape.window:
        return None
    layout = Layout.of(dict(spec.settings))
    own = meta.size_bytes + kv_bytes(shape, layout, swa_full=False)
    adds = full_window_adds(shape, layout)
    return adds, (own + adds) / own


def _costly(adds: int, ratio: float) -> str:
    return (
        f"sliding-window model: reusing saved slots needs the full-size window cache, "
        f"{adds / 1024**2:.0f} MiB more memory ({ratio:.2f}x llama-server's own); "
        f"cache_swa_full = true keeps them at that cost"
    )


def swa_full(spec: InstanceSpec) -> bool:
    """Whether the instance runs with the full-size sliding-window cache."""
    return dict(spec.settings).get(SWA_FULL, "") in _TRUE


def _without(spec: InstanceSpec, why: str, window: int | None = None) -> InstanceSpec:
    return dataclasses.replace(spec, prompt_cache=None, cache_note=why, window_cost=window)


def dropped(spec: InstanceSpec, why: str) -> InstanceSpec:
    """`spec` launched without its save directory (which cannot be made): the server
    would not start with it."""
    args = list(spec.args)
    if spec.prompt_cache is not None and args[-2:] == [SAVE_FLAG, str(spec.prompt_cache)]:
        args = args[:-2]
    return dataclasses.replace(_without(spec, why), args=tuple(args))


def cache_fit(spec: InstanceSpec, props: dict[str, Any]) -> dict[str, Any]:
    """What a saved slot fits: a file saved under any other is refused, never loaded.
    `props` is the running server's `GET /props`."""
    settings = dict(spec.settings)
    # A model llama-server downloads itself (`hf_repo`, `model_url`) is the file it
    # loaded: a new revision lands under the same name.
    loaded = props.get("model_path")
    path = spec.model or (Path(loaded) if isinstance(loaded, str) and loaded else None)
    model: dict[str, Any] = {"path": str(path)}
    if path is not None:
        try:
            st = path.stat()
            model |= {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
        except OSError:
            pass
    generation = props.get("default_generation_settings")
    return {
        "model": model,
        "cache_type_k": settings.get("LLAMA_ARG_CACHE_TYPE_K", "f16"),
        "cache_type_v": settings.get("LLAMA_ARG_CACHE_TYPE_V", "f16"),
        "n_ctx": generation.get("n_ctx") if isinstance(generation, dict) else None,
        "build": props.get("build_info"),
        "swa_full": swa_full(spec),
        "launch": launch(spec),
    }


def launch(spec: InstanceSpec) -> str:
    """A digest of the settings and arguments that shape what `spec`'s slots hold."""
    settings = sorted((k, v) for k, v in spec.settings if k not in _NEUTRAL)
    args = list(spec.args)
    if args[-2:] == [SAVE_FLAG, str(spec.prompt_cache)]:
        args = args[:-2]  # where the files go, not what they hold
    text = json.dumps([settings, args]).encode()
    return hashlib.blake2b(text, digest_size=8).hexdigest()
