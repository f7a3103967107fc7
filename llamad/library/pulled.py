"""What llamad pulled into the Hugging Face cache, remembered in the pull folder, file by
file: those files, and only those, `llamactl rm` may delete there. The cache is shared:
a person's own download of another quant of the same repo is never llamad's to remove."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from llamad.common.storefile import read_small

RECORD = ".llamad-pulled.json"
_MAX_RECORD = 16 << 20  # file names of many repos; the pull folder is a scanned one

# Repo id -> the files (as the repo names them) llamad pulled; None: every file of the
# repo (the first record's form, a list of repos, named no files; kept as null).
Pulled = Mapping[str, frozenset[str] | None]


def pulled_files(pull_dir: Path) -> dict[str, frozenset[str] | None]:
    """What llamad pulled; empty when nothing was (or the record is unreadable)."""
    try:
        doc = json.loads(read_small(pull_dir / RECORD, _MAX_RECORD))
    except (OSError, ValueError):
        return {}
    hf = doc.get("hf") if isinstance(doc, dict) else None
    if isinstance(hf, list):
        return {r: None for r in hf if isinstance(r, str)}
    if not isinstance(hf, dict):
        return {}
    return {
        repo: None if files is None else frozenset(f for f in files if isinstance(f, str))
        for repo, files in hf.items()
        if isinstance(repo, str) and (files is None or isinstance(files, list))
    }


def owns(pulled: Pulled, repo: str, files: Iterable[str]) -> bool:
    """Whether llamad pulled every one of `files` of `repo`."""
    if repo not in pulled:
        return False
    mine = pulled[repo]
    return mine is None or all(f in mine for f in files)


def remember(pull_dir: Path, repo: str, files: Iterable[str]) -> None:
    """Add `files` of `repo` to the record."""
    new = set(files)
    record = pulled_files(pull_dir)
    if not new or (repo in record and record[repo] is None):
        return  # nothing of llamad's own, or every file already
    record[repo] = (record.get(repo) or frozenset()) | new
    _write(pull_dir, record)


def forget(pull_dir: Path, repo: str, files: Iterable[str]) -> None:
    """Drop `files` of `repo` from the record (the repo too once none is left)."""
    record = pulled_files(pull_dir)
    if repo not in record:
        return
    had = record[repo]
    left = frozenset() if had is None else had - set(files)
    if had is not None and left:
        record[repo] = left
    else:
        # An old whole-repo entry goes with its first removal: what is left in the cache
        # cannot be told apart from a person's own downloads, so it is theirs from now on.
        del record[repo]
    _write(pull_dir, record)


def _write(pull_dir: Path, record: Mapping[str, frozenset[str] | None]) -> None:
    """Replace the record atomically (a crash leaves the old one or the new one)."""
    doc = {"hf": {r: None if fs is None else sorted(fs) for r, fs in sorted(record.items())}}
    pull_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=pull_dir, prefix=f".{RECORD}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, pull_dir / RECORD)
