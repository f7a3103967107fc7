"""A file's identity: what tells that it was replaced or rewritten since it was last seen."""

from __future__ import annotations

from pathlib import Path

FileId = tuple[int, int, int]


def file_id(path: Path) -> FileId | None:
    """(inode, size, mtime) of what `path` points at; None when it is missing."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
