"""A file's identity: what tells that it was replaced or rewritten since it was last seen."""

from __future__ import annotations

import hashlib
from pathlib import Path

# A file's (inode, size, mtime), or its contents' digest where a swap to the same text
# must move nothing (the config behind a Kubernetes ConfigMap's links).
FileId = tuple[int, int, int] | bytes


def file_id(path: Path) -> FileId | None:
    """(inode, size, mtime) of what `path` points at; None when it is missing."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def digest(path: Path) -> FileId | None:
    """The digest of what `path` holds now; None when it is missing."""
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None
