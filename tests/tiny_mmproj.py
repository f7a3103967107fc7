"""A tiny vision projector (mmproj) GGUF that the real llama-server loads beside the tiny
model: a one-layer CLIP encoder of width 32 over 32x32 images in 16x16 patches, and
LLaVA's two-layer MLP projector into the tiny model's 64-wide embeddings. Random weights:
it turns any image into four embeddings the model reads, which is all a test of the
image path needs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

WIDTH, FF, PATCH, IMAGE, HEADS = 32, 64, 16, 32, 2
TEXT_WIDTH = 64  # the tiny model's n_embd (llamad.daemon.tinymodel.TINY)


def write_tiny_mmproj(out: Path) -> Path:
    """Write the projector to `out` and return it."""
    import gguf

    writer = gguf.GGUFWriter(str(out), "clip")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_bool("clip.use_gelu", True)
    for key, value in {
        "image_size": IMAGE,
        "patch_size": PATCH,
        "embedding_length": WIDTH,
        "feed_forward_length": FF,
        "projection_dim": TEXT_WIDTH,
        "block_count": 1,
        "attention.head_count": HEADS,
    }.items():
        writer.add_uint32(f"clip.vision.{key}", value)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    rng = np.random.default_rng(0)
    # numpy shapes: ggml's dimensions reversed.
    shapes: dict[str, tuple[int, ...]] = {
        "v.patch_embd.weight": (WIDTH, 3, PATCH, PATCH),
        "v.position_embd.weight": ((IMAGE // PATCH) ** 2, WIDTH),
        "v.blk.0.ffn_up.weight": (FF, WIDTH),
        "v.blk.0.ffn_up.bias": (FF,),
        "v.blk.0.ffn_down.weight": (WIDTH, FF),
        "v.blk.0.ffn_down.bias": (WIDTH,),
        "mm.0.weight": (TEXT_WIDTH, WIDTH),
        "mm.0.bias": (TEXT_WIDTH,),
        "mm.2.weight": (TEXT_WIDTH, TEXT_WIDTH),
        "mm.2.bias": (TEXT_WIDTH,),
    }
    for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
        shapes[f"v.blk.0.{part}.weight"] = (WIDTH, WIDTH)
        shapes[f"v.blk.0.{part}.bias"] = (WIDTH,)
    for norm in ("ln1", "ln2"):
        shapes[f"v.blk.0.{norm}.bias"] = (WIDTH,)
        writer.add_tensor(f"v.blk.0.{norm}.weight", np.ones(WIDTH, np.float32))
    for name, shape in shapes.items():
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
