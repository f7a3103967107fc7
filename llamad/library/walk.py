"""A bounded walk of a model folder: symlinked folders followed once (a loop ends there),
hidden and partial files skipped, and every unreadable place one warning line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from llamad.common.storefile import NOT_REGULAR

# Deep enough for LM Studio's publisher/repo/file and then some; a walk never runs away
# into a huge tree someone pointed `dirs` at by mistake.
MAX_DEPTH = 6
MAX_FILES = 20_000
# Names downloaders give files still being written: never a model yet.
PARTIAL_SUFFIXES = (".part", ".partial", "-partial", ".incomplete", ".tmp", ".download", ".lock")


def is_partial(name: str) -> bool:
    """Whether `name` is a download or copy still under way (or a hidden temporary)."""
    return name.startswith(".") or name.endswith(PARTIAL_SUFFIXES)


@dataclass
class Walk:
    """The GGUF files under one folder, and what could not be read."""

    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def gguf_files(root: Path) -> Walk:
    """Every `*.gguf` under `root` (case-insensitive), in a stable order."""
    out = Walk()
    seen: set[tuple[int, int]] = set()
    for path in _walk(root, 0, seen, out):
        out.files.append(path)
        if len(out.files) >= MAX_FILES:
            out.warnings.append(f"{root}: more than {MAX_FILES} GGUF files; the rest ignored")
            break
    out.files.sort()
    return out


def _walk(folder: Path, depth: int, seen: set[tuple[int, int]], out: Walk) -> Iterator[Path]:
    try:
        st = folder.stat()
    except OSError as exc:
        out.warnings.append(f"{folder!s}: cannot read: {exc.strerror or exc}")
        return
    if (st.st_dev, st.st_ino) in seen:
        if folder.is_symlink():  # a loop (or a second way in): said once per scan
            out.warnings.append(f"{folder!s}: a symlink to a folder already read; not followed")
        return
    seen.add((st.st_dev, st.st_ino))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        out.warnings.append(f"{folder!s}: cannot read: {exc.strerror or exc}")
        return
    for entry in entries:
        if is_partial(entry.name):
            continue
        try:
            is_dir = entry.is_dir()  # follows symlinks; a dangling one is neither
            is_file = not is_dir and entry.is_file()
        except OSError:
            continue
        if is_dir and depth < MAX_DEPTH:
            yield from _walk(Path(entry.path), depth + 1, seen, out)
        elif entry.name.lower().endswith(".gguf"):
            if is_file:
                yield Path(entry.path)
            elif not is_dir and os.path.exists(entry.path):  # a FIFO, a device: never opened
                out.warnings.append(f"{entry.path!s}: {NOT_REGULAR}; skipped")
