"""How much memory a model needs, how much one uses, and how much there is.

Before a model has run, its need is estimated as Ollama does: the GGUF file plus its KV
cache, read from the header (layers x KV heads x key/value lengths x context x the
cache type's bytes). Once it has run, its measured footprint (USS) replaces the guess.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

import psutil

from llamad.backends.gguf_meta import read_gguf_meta
from llamad.backends.registry import backend_for
from llamad.backends.spec import InstanceSpec

# Bytes per cached element for llama-server's --cache-type-k/-v (ggml block sizes).
_CACHE_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
# "auto": what is free now plus what our models hold, minus this much for everything else.
MARGIN_FRACTION = 0.10
MARGIN_MAX = 2 * 1024**3


def estimate(spec: InstanceSpec) -> int | None:
    """Bytes `spec` should need once loaded; None when its model is not a local file."""
    if spec.model is None:
        return None
    known = backend_for(spec.kind).memory_estimate(spec)
    if known is not None:
        return known
    settings = dict(spec.settings)
    try:
        return _estimate(
            spec.model,
            spec.model.stat().st_mtime_ns,
            int(settings.get("LLAMA_ARG_CTX_SIZE", "0") or 0),
            settings.get("LLAMA_ARG_CACHE_TYPE_K", "f16"),
            settings.get("LLAMA_ARG_CACHE_TYPE_V", "f16"),
        )
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def _estimate(path: Path, mtime: int, ctx: int, type_k: str, type_v: str) -> int:
    size = path.stat().st_size
    header = _kv_shape(path)
    if header is None:
        return size
    layers, kv_heads, key_len, value_len, trained_ctx = header
    # llama-server's ctx_size 0 means the model's own context.
    ctx = ctx or trained_ctx
    per_token = layers * kv_heads * (key_len * _bytes(type_k) + value_len * _bytes(type_v))
    return size + int(per_token * ctx)


def _bytes(cache_type: str) -> float:
    return _CACHE_BYTES.get(cache_type.lower(), 2.0)


def _kv_shape(path: Path) -> tuple[int, int, int, int, int] | None:
    """(layers, kv heads, key length, value length, trained context) from the header."""
    try:
        meta = read_gguf_meta(path)
    except (OSError, ValueError):  # unreadable or not a GGUF file: fall back to its size
        return None
    layers, heads = meta.block_count, meta.head_count
    key_len, value_len = meta.head_dims
    if not layers or not heads or not key_len or not value_len:
        return None
    kv_heads = meta.head_count_kv or heads
    return layers, kv_heads, key_len, value_len, meta.context_length or 4096


def footprint(pid: int | None) -> int | None:
    """What process `pid` holds that nothing else does (USS), or None when it is gone."""
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).memory_full_info().uss)
    except (psutil.Error, AttributeError):
        return None


def available() -> int:
    """Free memory now: MemAvailable capped by the cgroup's limit (Linux); on macOS what
    psutil reports, capped by an estimate of Metal's recommended working set."""
    vm = psutil.virtual_memory()
    free = int(vm.available)
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        # Metal's recommendedMaxWorkingSetSize is about 2/3 of RAM up to 36 GiB, 3/4 above.
        share = 2 / 3 if vm.total <= 36 * 1024**3 else 3 / 4
        free = min(free, int(vm.total * share))
    limit = _cgroup_room()
    return min(free, limit) if limit is not None else free


def _cgroup_room() -> int | None:
    base = Path("/sys/fs/cgroup")
    try:
        limit = (base / "memory.max").read_text().strip()
        used = int((base / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    if limit == "max":
        return None
    return max(0, int(limit) - used)


def margin(total: int) -> int:
    """What `memory_budget = "auto"` leaves for everything else."""
    return min(int(total * MARGIN_FRACTION), MARGIN_MAX)
