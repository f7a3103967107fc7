"""A text file written line by line and rotated by size, as the standard library's
`RotatingFileHandler` rotates (NAME -> NAME.1 -> ... -> NAME.backups), on the file
system's public calls alone.

Written whole rather than built on the handler: its per-open hook (`_open`) is private,
and it is where the handler's one test that matters here must go: a file that is not a
regular one (`/dev/null`, a FIFO, a symlink to either) is never rotated (bpo-45401;
renaming it would move the device's name, not a log). The size is the open file's own
(`fstat`), so another writer that truncates it (a copy-and-truncate logrotate) moves
the end for this one too, at one system call a line.
"""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path
from typing import BinaryIO


class RotatingFile:
    """`path`, appended to; past `max_bytes` (when > 0) it becomes `path.1`, the older
    copies move up one and the oldest past `backups` is removed. Every method may raise
    OSError; after one the file is closed, and the next line opens it anew."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self._stream: BinaryIO | None = None

    def write(self, text: str) -> None:
        """Append `text` and a newline, rotating first when they would reach the limit."""
        data = (text + "\n").encode("utf-8", "replace")
        try:
            stream = self._stream or self._open()
            if self._due(stream, len(data)):
                self.close()
                self._rotate()
                stream = self._open()
            stream.write(data)
            stream.flush()
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        """Close the file; the next line opens it again."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _open(self) -> BinaryIO:
        self._stream = self.path.open("ab")
        return self._stream

    def _due(self, stream: BinaryIO, size: int) -> bool:
        if self.max_bytes <= 0 or self.backups <= 0:
            return False  # the standard library's handler never rolls over then either
        info = os.fstat(stream.fileno())
        return stat.S_ISREG(info.st_mode) and info.st_size + size >= self.max_bytes

    def _rotate(self) -> None:
        """As `RotatingFileHandler.doRollover`: remove what is in the way, then rename
        (a directory in the way fails the rotation rather than being moved)."""
        names = [str(self.path)] + [f"{self.path}.{n}" for n in range(1, self.backups + 1)]
        for older, newer in reversed(list(itertools.pairwise(names))):
            if os.path.exists(older):
                if os.path.exists(newer):
                    os.remove(newer)
                os.rename(older, newer)
