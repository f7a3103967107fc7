"""The KV cache's bytes as llama-server sizes them (`kv_cache`): the sliding-window layers
hold their window unless `--swa-full`, which then adds the rest of the context to each."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamad.backends.gguf_meta import GGUFMeta
from llamad.backends.kv_cache import KVShape, Layout, full_window_adds, kv_bytes, kv_shape


def _meta(arch: str, layers: int, kv_heads: int, head: int, **scalars: object) -> GGUFMeta:
    return GGUFMeta(
        path=Path("m.gguf"),
        size_bytes=0,
        mtime_ns=0,
        architecture=arch,
        block_count=layers,
        head_count=kv_heads * 2,
        head_count_kv=kv_heads,
        key_length=head,
        value_length=head,
        context_length=131072,
        scalars={f"{arch}.{k.replace('__', '.')}": v for k, v in scalars.items()},
    )


# Gemma 3 27B: 62 layers, 16 KV heads of 128, one layer in six global, window 1024.
GEMMA_27B = _meta("gemma3", 62, 16, 128, attention__sliding_window=1024)
# gpt-oss-20b: 24 layers, 8 KV heads of 64, every other layer windowed (128).
GPT_OSS_20B = _meta("gpt-oss", 24, 8, 64, attention__sliding_window=128)
ONE_SLOT = {"LLAMA_ARG_N_PARALLEL": "1"}


@pytest.mark.parametrize(
    ("meta", "ctx", "full", "default"),
    [
        # 62 x 32768 x 8 KiB, against 10 global layers at 32768 and 52 at 1024 + 512.
        (GEMMA_27B, 32768, 16_642_998_272, 3_338_665_984),
        # 24 x 131072 x 2 KiB, against 12 at 131072 and 12 at 128 + 512, padded to 768.
        (GPT_OSS_20B, 131072, 6_442_450_944, 3_240_099_840),
    ],
)
def test_the_full_window_cache_against_llama_servers_own(
    meta: GGUFMeta, ctx: int, full: int, default: int
) -> None:
    shape = kv_shape(meta)
    assert shape is not None
    layout = Layout.of({**ONE_SLOT, "LLAMA_ARG_CTX_SIZE": str(ctx)})
    assert kv_bytes(shape, layout, swa_full=True) == full
    assert kv_bytes(shape, layout, swa_full=False) == default
    assert full_window_adds(shape, layout) == full - default


@pytest.mark.parametrize(
    ("settings", "window_cells"),
    [
        # Slots left to llama-server: 4, one shared cache holding each one's window.
        ({}, 4 * 1024 + 512),
        ({"LLAMA_ARG_N_PARALLEL": "4"}, 4 * 1536),  # a cache per slot
        ({"LLAMA_ARG_N_PARALLEL": "4", "LLAMA_ARG_KV_UNIFIED": "true"}, 4 * 1024 + 512),
        ({**ONE_SLOT, "LLAMA_ARG_UBATCH": "100"}, 1280),  # 1124, padded to 256
        ({**ONE_SLOT, "LLAMA_ARG_CTX_SIZE": "1000"}, 1024),  # never over the context, padded
    ],
)
def test_the_window_cache_follows_slots_and_batch(
    settings: dict[str, str], window_cells: int
) -> None:
    shape = kv_shape(GEMMA_27B)
    assert shape is not None
    layout = Layout.of({"LLAMA_ARG_CTX_SIZE": "32768", **settings})
    ctx = layout.ctx
    assert kv_bytes(shape, layout, swa_full=False) == 8192 * (10 * ctx + 52 * window_cells)


def test_cache_types_and_the_trained_context() -> None:
    shape = kv_shape(GPT_OSS_20B)
    assert shape is not None
    q8 = Layout.of({**ONE_SLOT, "LLAMA_ARG_CACHE_TYPE_K": "q8_0", "LLAMA_ARG_CACHE_TYPE_V": "q8_0"})
    assert kv_bytes(shape, q8, swa_full=True) == 24 * 131072 * 8 * 128 * 34 // 32


def test_a_per_layer_pattern_and_an_unknown_one() -> None:
    flags = [True, True, False] * 4
    listed = kv_shape(_meta("x", 12, 1, 64, attention__sliding_window=256,
                            attention__sliding_window_pattern=flags))  # fmt: skip
    assert listed is not None
    assert listed.windowed == 8
    unknown = kv_shape(_meta("x", 12, 1, 64, attention__sliding_window=256))
    assert unknown == KVShape(12, 1, 64, 64, 131072, window=256, windowed=None)
    layout = Layout.of({**ONE_SLOT, "LLAMA_ARG_CTX_SIZE": "8192"})
    # Not knowing which layers are windowed: the worse case each way.
    assert kv_bytes(unknown, layout, swa_full=False) == kv_bytes(unknown, layout, swa_full=True)
    assert full_window_adds(unknown, layout) == 12 * 256 * (8192 - 768)
    plain = kv_shape(_meta("llama", 12, 1, 64))
    assert plain is not None
    assert full_window_adds(plain, layout) == 0
