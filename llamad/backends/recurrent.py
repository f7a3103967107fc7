"""Hybrid and recurrent architectures, recognised from a GGUF's header.

Their slot files hold the recurrent state and the tokens but not the context checkpoints
llama-server reuses a prefix from, so a restore answers success and the next request is
evaluated in full (llama.cpp #25913, #28194, #26676, open in December 2026). Knowing the
architecture lets the first such restore be read as expected (`supervise/slot_verdicts.py`).
"""

from __future__ import annotations

from pathlib import Path

from llamad.backends.gguf_meta import header_of

# `general.architecture` values of llama.cpp's hybrid and recurrent models.
KNOWN = frozenset(
    ("qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe", "granitehybrid", "nemotron_h",
     "nemotron_h_moe", "jamba", "falcon-h1", "mamba", "mamba2", "rwkv6", "rwkv6qwen2",
     "rwkv7", "arwkv7", "plamo2")
)  # fmt: skip
# Keys under these (after `<arch>.`) are a recurrent block's: a new hybrid has them too.
_SIGNS = ("ssm.", "shortconv.", "wkv.")


def recurrent(model: Path | None) -> str | None:
    """The model's architecture when it is hybrid or recurrent, else None (or unreadable)."""
    meta = header_of(model)
    if meta is None:
        return None
    arch = meta.architecture
    if arch in KNOWN:
        return arch
    prefixes = tuple(f"{arch}.{sign}" for sign in _SIGNS)
    return arch if any(k.startswith(prefixes) for k in meta.scalars) else None
