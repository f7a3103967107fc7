"""A downloaded llama.cpp that macOS will not run: the quarantine flag and its one-line fix.

A release archive unpacked from a browser download keeps `com.apple.quarantine` on every
file. Gatekeeper then refuses the unsigned executable: exec fails with EPERM, or the
process is killed with SIGKILL before it prints anything, and all llamad could say was
"Operation not permitted" or "killed by SIGKILL". When a run fails that way, `Quarantine`
looks for the flag on the executable and the ggml libraries it loads, and names the fix.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path

from llamad.backends.linked_libs import linked_libraries

ATTR = "com.apple.quarantine"
Reader = Callable[[Path], bytes | None]


def read_xattr(path: Path, name: str) -> bytes | None:
    """The extended attribute `name` of what `path` points at; None when it has none."""
    if hasattr(os, "getxattr"):  # Linux; macOS's os module has no xattr calls
        try:
            return os.getxattr(path, name)
        except OSError:
            return None
    if sys.platform != "darwin":
        return None
    return _darwin_getxattr(os.fsencode(path), name.encode())


def _darwin_getxattr(path: bytes, name: bytes) -> bytes | None:
    # getxattr(path, name, value, size, position, options), as <sys/xattr.h> declares it.
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_ssize_t,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint32,
        ctypes.c_int,
        use_errno=True,
    )
    getxattr = prototype(("getxattr", ctypes.CDLL(None, use_errno=True)))
    size = getxattr(path, name, None, 0, 0, 0)  # options 0: follow symlinks
    if size < 0:
        return None
    buf = ctypes.create_string_buffer(max(size, 1))
    got = getxattr(path, name, buf, size, 0, 0)
    return buf.raw[:got] if got >= 0 else None


def read_quarantine(path: Path) -> bytes | None:
    """The quarantine flag of `path`, as macOS keeps it."""
    return read_xattr(path, ATTR)


class Quarantine:
    """Tells a run that failed because of macOS's quarantine flag; `reader` reads the flag
    (a stand-in in tests: Linux cannot carry a `com.apple.*` attribute)."""

    def __init__(self, reader: Reader = read_quarantine) -> None:
        self._reader = reader

    def problem(self, executable: Path) -> str | None:
        """One line naming the quarantined files of `executable` and the command that
        clears them; None when none is quarantined."""
        real = Path(os.path.realpath(executable))
        files = dict.fromkeys([real, *map(_real, linked_libraries(executable))])
        flagged = [path for path in files if self._reader(path) is not None]
        if not flagged:
            return None
        if len(flagged) == 1:
            fix = f"xattr -d {ATTR} {flagged[0]}"
        else:
            fix = f"xattr -dr {ATTR} {os.path.commonpath([p.parent for p in flagged])}"
        what = str(flagged[0]) + (f" and {len(flagged) - 1} more" if len(flagged) > 1 else "")
        return f"macOS will not run {what}: it is quarantined (downloaded); run: {fix}"

    def refused_exec(self, executable: Path, exc: OSError) -> str | None:
        """Why exec of `executable` failed with `exc`, when the flag explains it."""
        return self.problem(executable) if exc.errno in (errno.EPERM, errno.EACCES) else None

    def refused_run(self, executable: Path, killed_by: str | None, output: list[str]) -> str | None:
        """Why `executable` died as it did (`killed_by`: the signal's name), when the flag
        explains it: Gatekeeper's SIGKILL comes before the process has printed anything."""
        if killed_by != "SIGKILL" or any(line.strip() for line in output):
            return None
        return self.problem(executable)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


# What llamad asks when a run fails; a test builds its own with a stand-in reader.
GATEKEEPER = Quarantine()
