"""Whether llama-server can load a GGUF file, judged from its header: the magic, a header
that parses, tensor types this llama.cpp knows, and every tensor's data present.

A file still being copied has a valid header long before its last tensor arrives, so
"complete" means the file reaches the end its header promises. Results are cached by
path, size and mtime: a reload rescans the library without reading headers again.
"""

from __future__ import annotations

import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from llamad.backends.gguf_header import scan
from llamad.common.storefile import NOT_REGULAR


@dataclass(frozen=True)
class FileCheck:
    """One file's verdict; `problem` None means loadable as far as the header tells."""

    problem: str | None
    architecture: str | None = None
    file_type: int | None = None
    size: int = 0

    @property
    def projector(self) -> bool:
        """A vision projector (mmproj): llama.cpp's CLIP architecture."""
        return self.architecture == "clip"


_cache: dict[tuple[str, int, int], FileCheck] = {}
_lock = threading.Lock()
_MAX_CACHED = 4096


def check_file(path: Path) -> FileCheck:
    """The verdict on `path` (followed if a symlink); never raises."""
    try:
        st = path.stat()
    except OSError as exc:
        return FileCheck(f"cannot read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device: never opened
        return FileCheck(NOT_REGULAR)
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    verdict = _check(path, st.st_size)
    with _lock:
        if len(_cache) >= _MAX_CACHED:
            _cache.clear()
        _cache[key] = verdict
    return verdict


def _check(path: Path, size: int) -> FileCheck:
    if size == 0:
        return FileCheck("empty file", size=0)
    try:
        header = scan(path)
    except OSError as exc:
        return FileCheck(f"cannot read: {exc.strerror or exc}", size=size)
    except (ValueError, OverflowError, MemoryError) as exc:
        return FileCheck(f"not a loadable GGUF file: {exc}", size=size)
    arch = header.scalars.get("general.architecture")
    ftype = header.scalars.get("general.file_type")
    arch = arch if isinstance(arch, str) else None
    ftype = ftype if isinstance(ftype, int) and not isinstance(ftype, bool) else None
    if arch is None and not header.scalars.get("split.no"):  # later split parts have none
        return FileCheck("not a loadable GGUF file: no general.architecture", size=size)
    if size < header.data_end:
        return FileCheck(
            f"incomplete: {size} of {header.data_end} bytes (still being written, or cut)",
            arch,
            ftype,
            size,
        )
    return FileCheck(None, arch, ftype, size)
