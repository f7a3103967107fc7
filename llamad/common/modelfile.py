"""Whether a model file can be used: checked when the config loads and again at launch."""

from __future__ import annotations

import os
from pathlib import Path


def model_problem(model: Path | None) -> str | None:
    """Why the server could not open `model`, or None when it can (or there is none).

    Opening it is the one honest test: permissions, ACLs and sandboxes all show there, and
    llama-server's own message for it ('cleaning up before exit...') names no cause.
    """
    if model is None:
        return None
    if model.is_dir():  # an MLX model: its backend checks what the directory holds
        return None if os.access(model, os.R_OK | os.X_OK) else f"cannot read {model}"
    if not model.is_file():
        return f"model file not found: {model}"
    try:
        fd = os.open(model, os.O_RDONLY)
    except OSError as exc:
        return f"cannot read model file {model}: {exc.strerror}"
    os.close(fd)
    return None
