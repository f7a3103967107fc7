"""A tiny, valid GGUF model for ``llamad --demo`` and the test suite.

The model is random noise (a 2-layer llama with n_embd 64) but it is a real model:
llama-server loads it in milliseconds and answers completions with printable text,
which is all a supervisor needs to exercise start, health, restart and stop.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamad.common import paths

_MISSING_EXTRA = "the demo needs the 'demo' extra: pip install 'llamad[demo]'"

N_CTX = 4096  # n_ctx_train: llama-server clips a larger per-slot -c to this


@dataclass(frozen=True)
class Shape:
    """A random llama's dimensions; `f16` stores its matrices at half the size."""

    n_embd: int = 64
    n_head: int = 4
    n_layer: int = 2
    n_ff: int = 128
    f16: bool = False


TINY = Shape()

# Token types from gguf.TokenType, spelled out so building the vocab needs no import.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6
# Bytes the model may emit: printable ASCII plus tab and newline. Every other byte stays in
# the vocabulary (so any UTF-8 prompt tokenizes) but as a CONTROL token, which llama-server
# renders as nothing: random weights could otherwise emit a lone 0x80.. byte, and the
# server rejects its own output as invalid UTF-8.
_EMITTABLE = frozenset([0x09, 0x0A, *range(0x20, 0x7F)])
# Fill-in-the-middle markers for /infill: three of the never-emitted control bytes (token id
# is 3 + byte), so the vocabulary and the weights stay as they were.
FIM_PRE, FIM_SUF, FIM_MID = 3 + 0x01, 3 + 0x02, 3 + 0x03

# A ChatML template that mentions tools, so Ollama's /api/show can report the "tools"
# capability the way it does for real chat models.
CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{{ message.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _vocab(special: tuple[str, ...]) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece ("llama") vocab, 260 tokens: 3 specials, 256 bytes, the space piece;
    then `special` as control tokens.

    SPM escapes spaces to U+2581 ("▁"); as a token of its own it renders back as " ", so
    the model can emit spaces. No merges or scores matter: everything else is bytes.
    """
    tokens = ["<unk>", "<s>", "</s>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(_BYTE if b in _EMITTABLE else _CONTROL)
    tokens.append("\u2581")
    types.append(_NORMAL)
    tokens += special
    types += [_CONTROL] * len(special)
    return tokens, [0.0] * len(tokens), types


def add_vocab(w: Any, tokens: list[str], scores: list[float], types: list[int]) -> None:
    """The vocabulary of `_vocab` into the GGUF writer `w`, as a SentencePiece tokenizer."""
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)  # keep "Hello" as 5 bytes, not "▁Hello"


def write_tiny_model(
    path: Path,
    seed: int = 0,
    shape: Shape = TINY,
    split: int = 0,
    chat_template: str | None = CHAT_TEMPLATE,
    special_tokens: tuple[str, ...] = (),
) -> Path:
    """Write a tiny random llama GGUF (about 470 KB) to ``path`` and return ``path``.

    A larger ``shape`` gives a model that generates at a real model's pace (the
    benchmarks use one), with the same vocabulary and the same printable output.

    The file appears atomically: it is written to a temporary sibling and renamed over
    ``path``, so a concurrent reader (or a crash midway) never sees a half-written model.
    Same ``seed``, same bytes. With ``split``, at most that many tensors go in each file
    (``NAME-00001-of-0000N.gguf`` beside ``path``), as llama.cpp's gguf-split writes them;
    the first file's path is returned. `chat_template` None: the header carries none.
    `special_tokens` are added to the vocabulary as control tokens (never emitted).
    """
    try:
        import gguf
        import numpy as np
    except ImportError as exc:
        raise RuntimeError(_MISSING_EXTRA) from exc

    tokens, scores, types = _vocab(special_tokens)
    rng = np.random.default_rng(seed)

    matrix = np.float16 if shape.f16 else np.float32

    def rand(*dims: int, std: Any = 0.02) -> Any:
        # Small weights keep activations tame. Cast last: f64 tensors crash llama-server.
        return (rng.standard_normal(dims) * std).astype(matrix)

    def ones(n: int) -> Any:
        return np.ones(n, dtype=np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    shards = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.")) if split else None
    try:
        out = shards / path.name if shards else tmp
        w = gguf.GGUFWriter(out, "llama", split_max_tensors=split)
        w.add_name("llamad tiny random llama")
        w.add_basename("llamad-tiny")
        w.add_file_type(1 if shape.f16 else 0)  # MOSTLY_F16 or ALL_F32
        w.add_context_length(N_CTX)
        w.add_embedding_length(n_embd := shape.n_embd)
        w.add_block_count(shape.n_layer)
        w.add_feed_forward_length(n_ff := shape.n_ff)
        w.add_head_count(shape.n_head)
        w.add_head_count_kv(shape.n_head)
        w.add_rope_dimension_count(n_embd // shape.n_head)
        w.add_layer_norm_rms_eps(1e-5)
        add_vocab(w, tokens, scores, types)
        if chat_template is not None:
            w.add_chat_template(chat_template)
        w.add_uint32(gguf.Keys.Tokenizer.FIM_PRE_ID, FIM_PRE)
        w.add_uint32(gguf.Keys.Tokenizer.FIM_SUF_ID, FIM_SUF)
        w.add_uint32(gguf.Keys.Tokenizer.FIM_MID_ID, FIM_MID)

        # numpy shapes are (rows, cols) = GGUF's ne reversed: a weight maps cols -> rows.
        w.add_tensor("token_embd.weight", rand(len(tokens), n_embd))
        w.add_tensor("output_norm.weight", ones(n_embd))
        # Emittable tokens get output rows 50x larger (std 1) than the rest. The final hidden
        # state has norm sqrt(n_embd) after RMSNorm (8 for TINY), so their logits spread about
        # that far while CONTROL bytes, <unk> and </s> sit near 0: sampling (top-k 40 by
        # default) then picks printable text and essentially never stops early, so n_predict
        # tokens give n_predict characters.
        emit_std = np.array([1.0 if t in (_BYTE, _NORMAL) else 0.02 for t in types])
        w.add_tensor("output.weight", rand(len(tokens), n_embd, std=emit_std[:, None]))
        for i in range(shape.n_layer):
            p = f"blk.{i}."
            w.add_tensor(p + "attn_norm.weight", ones(n_embd))
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                w.add_tensor(f"{p}{name}.weight", rand(n_embd, n_embd))
            w.add_tensor(p + "ffn_norm.weight", ones(n_embd))
            w.add_tensor(p + "ffn_gate.weight", rand(n_ff, n_embd))
            w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
            w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))

        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        if shards is not None:
            return _place_shards(shards, path.parent)
        # Flush to disk before the rename so a power cut cannot leave an empty model behind.
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.chmod(0o644)  # mkstemp makes 0600; the model is not a secret
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        if shards is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
                shards.rmdir()
    return path


def _place_shards(shards: Path, folder: Path) -> Path:
    names = sorted(p.name for p in shards.iterdir())
    for name in names:
        (shards / name).chmod(0o644)
        os.replace(shards / name, folder / name)
    return folder / names[0]


def demo_model_path() -> Path:
    """Return the demo model's path, writing it first if it is missing or empty.

    Lives in ``$XDG_DATA_HOME/llamad/tiny-llama.gguf`` (default ``~/.local/share``) so
    every ``llamad --demo`` after the first reuses it.
    """
    path = paths.data_home() / "tiny-llama.gguf"
    try:
        usable = path.stat().st_size > 0
    except FileNotFoundError:
        usable = False
    if not usable:
        write_tiny_model(path)
    return path
