"""Files of a model store someone else laid out, opened and read without trusting them.

A store (Ollama's, the Hugging Face cache, a models folder) may hold anything: a FIFO
blocks an open until a writer comes (and the thread holding it, the daemon's exit), a
link to /dev/zero never ends a read. So a store's file is opened non-blocking, used only
when the opened descriptor is a regular file, and a small one is read with a bound.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

NOT_REGULAR = "not a regular file"


def open_regular(path: Path | str) -> int:
    """A read-only descriptor of `path` (links followed); OSError unless it is a regular
    file. Checked on the descriptor itself, so a file swapped after a stat is caught."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
        # Back to blocking reads: on a regular file the flag means nothing, but a reader
        # that gets EAGAIN from a network file system would take it for an error.
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small(path: Path | str, limit: int) -> bytes:
    """The whole of the regular file at `path`; OSError if it is not one or holds more
    than `limit` bytes (never more than `limit` + 1 are read)."""
    with os.fdopen(open_regular(path), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return data
