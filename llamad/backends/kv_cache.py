"""How many bytes llama-server's KV cache takes, as it sizes it: every layer holds the
whole context, except the sliding-window layers, which hold their window (and a batch)
unless the full-size window cache (`--swa-full`) is asked for.

The one place this arithmetic lives: the gateway's memory estimate and the prompt
cache's choice of `--swa-full` both read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from llamad.backends.gguf_meta import GGUFMeta
from llamad.backends.llama_serving import AUTO_SLOTS

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
# Architectures whose GGUF names a window but not which layers use it: llama.cpp fixes
# the pattern in code (`set_swa_pattern(n)`: in each run of n layers, all but the last
# are windowed).
_PATTERNS = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2, "cohere2": 4}
_TRUE = ("on", "enabled", "true", "1")
_UBATCH = 512  # llama-server's default physical batch
_PAD = 256  # llama.cpp pads the window cache to this many cells


@dataclass(frozen=True)
class KVShape:
    """What the header says the KV cache holds per token."""

    layers: int
    kv_heads: int
    key_len: int
    value_len: int
    trained_ctx: int
    window: int = 0  # tokens a windowed layer attends to; 0: no sliding window
    # How many layers are windowed; None: the header does not say (counted as the worse
    # case each time: all of them for what `--swa-full` adds, none for the estimate).
    windowed: int | None = 0


@dataclass(frozen=True)
class Layout:
    """How llama-server lays the cache out, from an instance's LLAMA_* settings."""

    ctx: int  # 0: the model's trained context
    slots: int
    unified: bool
    ubatch: int
    type_k: str
    type_v: str

    @classmethod
    def of(cls, settings: dict[str, str]) -> Layout:
        """Read as llama-server reads them: slots left to it are 4 with one shared cache."""
        parallel = _int(settings.get("LLAMA_ARG_N_PARALLEL"))
        auto = parallel is None or parallel < 1
        return cls(
            ctx=max(0, _int(settings.get("LLAMA_ARG_CTX_SIZE")) or 0),
            slots=AUTO_SLOTS if auto or parallel is None else parallel,
            unified=auto or settings.get("LLAMA_ARG_KV_UNIFIED", "") in _TRUE,
            ubatch=_int(settings.get("LLAMA_ARG_UBATCH")) or _UBATCH,
            type_k=settings.get("LLAMA_ARG_CACHE_TYPE_K", "f16"),
            type_v=settings.get("LLAMA_ARG_CACHE_TYPE_V", "f16"),
        )


def kv_shape(meta: GGUFMeta) -> KVShape | None:
    """The model's KV shape, or None when the header lacks a number it needs."""
    layers, heads = meta.block_count, meta.head_count
    key_len, value_len = meta.head_dims
    if not layers or not heads or not key_len or not value_len:
        return None
    window = _positive(meta.scalars.get(f"{meta.architecture}.attention.sliding_window"))
    return KVShape(
        layers=layers,
        kv_heads=meta.head_count_kv or heads,
        key_len=key_len,
        value_len=value_len,
        trained_ctx=meta.context_length or 4096,
        window=window,
        windowed=_windowed(meta, layers) if window else 0,
    )


def kv_bytes(shape: KVShape, layout: Layout, swa_full: bool) -> int:
    """Bytes of KV cache llama-server allocates for `shape` laid out as `layout`."""
    ctx = layout.ctx or shape.trained_ctx
    windowed = 0 if swa_full or shape.windowed is None else shape.windowed
    cells = (shape.layers - windowed) * ctx + windowed * _window_cells(shape, layout, ctx)
    return int(_per_cell(shape, layout) * cells)


def full_window_adds(shape: KVShape, layout: Layout) -> int:
    """Bytes `--swa-full` adds over llama-server's default window cache."""
    if not shape.window:
        return 0
    ctx = layout.ctx or shape.trained_ctx
    windowed = shape.layers if shape.windowed is None else shape.windowed
    cells = windowed * (ctx - _window_cells(shape, layout, ctx))
    return int(_per_cell(shape, layout) * max(0, cells))


def _window_cells(shape: KVShape, layout: Layout, ctx: int) -> int:
    # llama.cpp's llama_kv_cache_iswa: the window of every sequence (one stream shared by
    # all of them when unified) and a batch, padded; never more than the context.
    if layout.unified:
        return _pad(min(ctx, shape.window * layout.slots + layout.ubatch))
    per_slot = ctx // layout.slots
    return layout.slots * _pad(min(per_slot, shape.window + layout.ubatch))


def _per_cell(shape: KVShape, layout: Layout) -> float:
    """Bytes one token takes in one layer."""
    return shape.kv_heads * (
        shape.key_len * _bytes(layout.type_k) + shape.value_len * _bytes(layout.type_v)
    )


def _windowed(meta: GGUFMeta, layers: int) -> int | None:
    pattern = meta.scalars.get(f"{meta.architecture}.attention.sliding_window_pattern")
    if isinstance(pattern, list):  # one flag per layer
        return sum(1 for flag in pattern[:layers] if flag)
    every = _positive(pattern) or _PATTERNS.get(meta.architecture, 0)
    if not every:
        return None
    return sum(1 for layer in range(layers) if layer % every < every - 1)


def _pad(cells: int) -> int:
    return -(-cells // _PAD) * _PAD


def _bytes(cache_type: str) -> float:
    return _CACHE_BYTES.get(cache_type.lower(), 2.0)


def _positive(value: object) -> int:
    if isinstance(value, list):
        value = max(value, default=0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
