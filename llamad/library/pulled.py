"""What llamad pulled into the Hugging Face cache, remembered in the pull folder: those
models, and only those, `llamactl rm` may delete there (the cache is shared)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

RECORD = ".llamad-pulled.json"


def pulled_repos(pull_dir: Path) -> frozenset[str]:
    """The Hugging Face repos llamad pulled; empty when nothing was (or unreadable)."""
    try:
        doc = json.loads((pull_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return frozenset()
    repos = doc.get("hf") if isinstance(doc, dict) else None
    return frozenset(r for r in repos or () if isinstance(r, str))


def remember(pull_dir: Path, repo: str, keep: bool = True) -> None:
    """Add `repo` to the record (or drop it: `keep=False`), replacing the file atomically."""
    repos = set(pulled_repos(pull_dir))
    if keep:
        repos.add(repo)
    else:
        repos.discard(repo)
    pull_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=pull_dir, prefix=f".{RECORD}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"hf": sorted(repos)}, f)
    os.replace(tmp, pull_dir / RECORD)
