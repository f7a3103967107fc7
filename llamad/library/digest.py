"""A file's sha256, read in chunks: what every pulled file is checked against."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from llamad.common.storefile import open_regular

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The sha256 of the file at `path`, as lowercase hex."""
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()
