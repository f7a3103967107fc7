"""Rotating the file llamad's stderr was pointed at by launchd (StandardErrorPath).

launchd opens that file once per job start and never reopens it, so a rotation by rename
(newsyslog) would leave llamad writing to the renamed file. llamad rotates it itself, by
copy and truncate: when the file grows past `max_bytes` it is copied to `FILE.1` (older
copies shift to `.2` ... up to `backups`) and truncated in place. launchd opens it with
O_APPEND, so the next line lands at the new start; a file opened without O_APPEND is left
alone, since truncating it would leave a hole before the next write.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import TextIO


def path_of(fd: int) -> Path | None:
    """The file `fd` is open on, if the OS says (Linux /proc, macOS F_GETPATH)."""
    with contextlib.suppress(OSError, ValueError):
        if sys.platform == "darwin":
            raw = fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024))  # type: ignore[attr-defined]
            return Path(os.fsdecode(raw.split(b"\0", 1)[0]))
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    return None


class RotatingStreamHandler(logging.StreamHandler[TextIO]):
    """A StreamHandler that keeps an appended-to regular file under `max_bytes`."""

    def __init__(self, stream: TextIO, max_bytes: int, backups: int) -> None:
        super().__init__(stream)
        self.max_bytes, self.backups = max_bytes, backups
        self._fd: int | None = None
        self._path: Path | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fd = stream.fileno()
            if stat.S_ISREG(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
                self._fd, self._path = fd, path_of(fd)

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record, rotating first when the file is full (under the handler lock)."""
        if self._fd is not None and self._path is not None:
            with contextlib.suppress(OSError):
                if os.fstat(self._fd).st_size >= self.max_bytes:
                    self._rotate(self._path, self._fd)
        super().emit(record)

    def _rotate(self, path: Path, fd: int) -> None:
        self.flush()
        for n in range(self.backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if older.exists():
                older.replace(path.with_name(f"{path.name}.{n + 1}"))
        if self.backups > 0:
            shutil.copyfile(path, path.with_name(f"{path.name}.1"))
        os.ftruncate(fd, 0)
