"""Single-instance lock: one llamad per state directory.

Two daemons reading the same config would fight over the same ports and models, so the second
one must refuse to start. `flock` is the right tool: the kernel drops the lock when the holder
dies, however it dies, so there is never a stale lock to clean up by hand. The pid written into
the file is only for the error message; the lock itself is the truth.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

LOCK_NAME = "llamad.lock"


class AlreadyRunning(RuntimeError):
    """Another process holds the lock."""

    def __init__(self, pid: int | None) -> None:
        """`pid` is what the holder wrote into the lock file, if it could be read."""
        self.pid = pid
        super().__init__(f"already running (pid {pid if pid is not None else 'unknown'})")


class DaemonLock:
    """An exclusive, non-blocking flock on `<state_dir>/llamad.lock`.

    flock belongs to the open file description, so a second DaemonLock in the same process
    conflicts with the first just as another process would.
    """

    def __init__(self, state_dir: Path | None = None) -> None:
        """`state_dir` is used by `with DaemonLock(dir):` and by `acquire()` without args."""
        self._state_dir = state_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True between a successful acquire() and release()."""
        return self._fd is not None

    def acquire(self, state_dir: Path | None = None) -> DaemonLock:
        """Take the lock or raise AlreadyRunning; returns self for chaining into `with`."""
        if self._fd is not None:
            return self
        directory = state_dir or self._state_dir
        if directory is None:
            raise ValueError("DaemonLock needs a state directory")
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / LOCK_NAME
        # O_CLOEXEC: llama-server children must not inherit the descriptor, or an orphaned
        # child would keep the lock after the daemon died and block the next start.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise AlreadyRunning(holder) from None
        except BaseException:
            os.close(fd)
            raise
        # Only now, holding the lock, may we overwrite the previous holder's pid.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._state_dir = directory
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock; safe to call when it is not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        # Empty the file but leave it in place: unlinking would let a racing process lock the
        # old inode while a third one creates and locks a new file.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> DaemonLock:
        """Acquire (if not yet held) for the duration of the block."""
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release on the way out, whatever happened."""
        self.release()


def _read_pid(fd: int) -> int | None:
    """The pid the holder wrote, or None if it is missing (the holder may be mid-write)."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
