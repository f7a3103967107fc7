"""The GGUF header reader: facts from the tiny model, caching, and refusing non-GGUF files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from llamad.backends.gguf_meta import parameter_size, read_gguf_meta
from llamad.daemon.tinymodel import CHAT_TEMPLATE, FIM_MID, FIM_PRE, FIM_SUF, N_CTX


def test_reads_the_tiny_models_header(tiny_model: Path) -> None:
    meta = read_gguf_meta(tiny_model)
    assert meta.architecture == "llama"
    assert meta.basename == "llamad-tiny"
    assert meta.context_length == N_CTX
    assert (meta.block_count, meta.head_count, meta.head_count_kv) == (2, 4, 4)
    assert meta.embedding_length == 64
    assert meta.head_dims == (16, 16)  # no key_length in the file: n_embd / n_head
    assert meta.quantization == "F32"
    assert meta.parameter_count == 115520
    assert meta.chat_template == CHAT_TEMPLATE
    assert meta.has_fim
    assert meta.fim_token_ids == {"fim_pre": FIM_PRE, "fim_suf": FIM_SUF, "fim_mid": FIM_MID}
    assert meta.stop_tokens == ("</s>",)
    assert meta.size_bytes == tiny_model.stat().st_size


def test_cached_until_the_file_changes(tiny_model: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copy(tiny_model, tmp_path / "m.gguf"))
    first = read_gguf_meta(copy)
    assert read_gguf_meta(copy) is first
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = read_gguf_meta(copy)
    assert second is not first
    assert second == first.__class__(**{**first.__dict__, "mtime_ns": second.mtime_ns})


def test_not_a_gguf_file_is_a_value_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 10)
    with pytest.raises(ValueError, match="not a readable GGUF file"):
        read_gguf_meta(junk)
    with pytest.raises(FileNotFoundError):
        read_gguf_meta(tmp_path / "missing.gguf")


@pytest.mark.parametrize(
    ("count", "text"),
    [(7_615_616_512, "7.62B"), (494_032_768, "494.03M"), (115_520, "115.52K"), (12, "12")],
)
def test_parameter_size_as_ollama_prints_it(count: int, text: str) -> None:
    assert parameter_size(count) == text


def test_header_scan_agrees_with_gguf_reader(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_block_count(3)
    w.add_head_count_kv([2, 4, 2])  # per layer, as some models have it
    w.add_file_type(15)
    w.add_float32("qwen2.rope.freq_base", 1e6)
    w.add_token_list([f"tok{i}" for i in range(5000)])
    w.add_token_merges([f"a{i} b{i}" for i in range(3000)])
    w.add_eos_token_id(4999)
    w.add_tensor("a", np.zeros((3, 5), dtype=np.float32))
    w.add_tensor("b", np.zeros((7,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    meta = read_gguf_meta(path)
    reader = gguf.GGUFReader(path)
    array_t = gguf.GGUFValueType.ARRAY
    expected = {
        name: f.contents()
        for name, f in reader.fields.items()
        if not name.startswith("GGUF.") and f.types[:2] != [array_t, gguf.GGUFValueType.STRING]
    }
    assert meta.scalars == expected  # small numeric arrays included, strings arrays not
    assert meta.parameter_count == sum(int(t.n_elements) for t in reader.tensors) == 22
    assert meta.stop_tokens == ("tok4999",)
    assert (meta.architecture, meta.block_count, meta.head_count_kv) == ("qwen2", 3, 4)
    assert meta.quantization == "Q4_K_M"


def test_truncated_header_is_a_value_error(tiny_model: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_model.read_bytes()[:200])
    with pytest.raises(ValueError, match="not a readable GGUF file"):
        read_gguf_meta(cut)
