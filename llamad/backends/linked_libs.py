"""The ggml and llama shared libraries an llama.cpp executable loads, where builds put them.

An upgrade of those libraries alone changes the server as much as a new executable does:
Homebrew ships ggml as its own formula (`PREFIX/opt/ggml/lib/libggml*.dylib`, the
executable in `PREFIX/Cellar/llama.cpp/VERSION/bin`), so `brew upgrade ggml` replaces what
a running llama-server loaded without touching `llama-server`. Release archives and
CMake installs put the libraries beside the executable or in `../lib`.

Found by folder and name rather than by reading the executable's load commands: the
folders are where llama.cpp's own builds and Homebrew put them, and a library that moved
elsewhere is one llama-server would not find either.
"""

from __future__ import annotations

import os
from pathlib import Path

PREFIXES = ("libggml", "libllama", "libmtmd")


def library_dirs(binary: Path) -> list[Path]:
    """The folders `binary`'s ggml and llama libraries are loaded from, those that exist."""
    real = Path(os.path.realpath(binary))
    dirs = [binary.parent, real.parent, real.parent.parent / "lib"]
    # Homebrew's bin/ is a symlink farm: PREFIX/bin/llama-server -> ../Cellar/llama.cpp/V/bin.
    dirs.append(binary.parent.parent / "opt" / "ggml" / "lib")
    if "Cellar" in real.parts:
        cellar = len(real.parts) - 1 - real.parts[::-1].index("Cellar")
        dirs.append(Path(*real.parts[:cellar]) / "opt" / "ggml" / "lib")
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def linked_libraries(binary: Path) -> list[Path]:
    """The ggml/llama libraries in `binary`'s library folders, by the path it loads them
    from (a Homebrew `opt/` link is followed when read, so a repointed link is a change)."""
    found: list[Path] = []
    for folder in library_dirs(binary):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found += [folder / n for n in names if n.startswith(PREFIXES) and _is_library(n)]
    return found


def _is_library(name: str) -> bool:
    return name.endswith(".dylib") or name.endswith(".so") or ".so." in name
