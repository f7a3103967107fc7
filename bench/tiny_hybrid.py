"""A tiny recurrent model (Mamba, 2 layers of width 64, random weights) the real
llama-server loads: the shape of the hybrid and recurrent models whose saved slots a
restore puts back without a prefix the next request can reuse (llama.cpp #25913).

Tensor names and shapes as llama.cpp's loader wants them for `mamba` (its
`src/llama-model.cpp`): an inner size of twice the width, conv kernel 4, state 16,
time-step rank 4. numpy shapes are GGUF's dimensions reversed. The vocabulary is the tiny
llama's, so the same prompts tokenize the same way. The tests and the bench's hybrid row
run it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from llamad.daemon.tinymodel import _vocab, add_vocab

WIDTH, LAYERS, CONV, STATE, DT_RANK = 64, 2, 4, 16, 4
INNER = 2 * WIDTH  # llama.cpp takes no other expansion factor


def write_tiny_mamba(out: Path) -> Path:
    """Write the model to `out` and return it."""
    import gguf

    tokens, scores, types = _vocab(())
    rng = np.random.default_rng(0)

    def rand(*dims: int, std: float = 0.02) -> Any:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    def ones(*dims: int) -> Any:
        return np.ones(dims, dtype=np.float32)

    w = gguf.GGUFWriter(str(out), "mamba")
    w.add_name("llamad tiny random mamba")
    w.add_file_type(0)  # ALL_F32
    w.add_context_length(4096)
    w.add_embedding_length(WIDTH)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_ssm_conv_kernel(CONV)
    w.add_ssm_inner_size(INNER)
    w.add_ssm_state_size(STATE)
    w.add_ssm_time_step_rank(DT_RANK)
    w.add_layer_norm_rms_eps(1e-5)
    add_vocab(w, tokens, scores, types)
    w.add_tensor("token_embd.weight", rand(len(tokens), WIDTH))
    w.add_tensor("output_norm.weight", ones(WIDTH))
    w.add_tensor("output.weight", rand(len(tokens), WIDTH, std=1.0))
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(WIDTH))
        w.add_tensor(p + "ssm_in.weight", rand(2 * INNER, WIDTH))
        w.add_tensor(p + "ssm_conv1d.weight", rand(INNER, CONV))
        w.add_tensor(p + "ssm_conv1d.bias", np.zeros(INNER, dtype=np.float32))
        w.add_tensor(p + "ssm_x.weight", rand(DT_RANK + 2 * STATE, INNER))
        w.add_tensor(p + "ssm_dt.weight", rand(INNER, DT_RANK))
        w.add_tensor(p + "ssm_dt.bias", np.zeros(INNER, dtype=np.float32))
        w.add_tensor(p + "ssm_a", -ones(INNER, STATE))  # A = -exp(A_log): negative
        w.add_tensor(p + "ssm_d", ones(INNER))
        w.add_tensor(p + "ssm_out.weight", rand(WIDTH, INNER))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
