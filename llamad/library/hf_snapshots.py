"""The Hugging Face hub cache's layout, read as huggingface_hub documents it: each
`models--{user}--{repo}` folder's `refs/main` names its current commit, and
`snapshots/{commit}/` holds that revision's files (links into `blobs/`).

Read here, not with `huggingface_hub.scan_cache_dir()`: that opens every ref file with a
blocking read of the whole file, so one FIFO in a cache would hang the library's scan
(and the daemon's exit with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llamad.common.storefile import read_small
from llamad.library.walk import gguf_files

_PREFIX = "models--"
_MAX_REF = 4096  # a commit hash


@dataclass(frozen=True)
class Snapshot:
    """A model repo's current revision: its folder and the GGUF files in it (the links,
    as the repo names them)."""

    repo_id: str
    path: Path
    files: tuple[Path, ...]


def read_cache(root: Path, warnings: list[str]) -> list[Snapshot]:
    """Every model repo's current snapshot under `root` (datasets and spaces left out);
    what cannot be read goes to `warnings`."""
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith(_PREFIX) and p.is_dir())
    except OSError as exc:
        warnings.append(f"{root}: cannot read the Hugging Face cache: {exc.strerror or exc}")
        return []
    out = []
    for repo in repos:
        # As huggingface_hub names it: `models--user--repo` -> `user/repo`.
        repo_id = repo.name.removeprefix(_PREFIX).replace("--", "/")
        snapshot = _current(repo, warnings)
        if snapshot is None:
            continue
        walk = gguf_files(snapshot)
        warnings += walk.warnings
        out.append(Snapshot(repo_id, snapshot, tuple(walk.files)))
    return out


def _current(repo: Path, warnings: list[str]) -> Path | None:
    """The snapshot `refs/main` names, else the newest one (None: none at all)."""
    ref = repo / "refs" / "main"
    try:
        commit = read_small(ref, _MAX_REF).decode("ascii").strip()
    except FileNotFoundError:
        commit = ""
    except (OSError, ValueError) as exc:
        warnings.append(f"{ref}: unreadable ({getattr(exc, 'strerror', None) or exc}); ignored")
        commit = ""
    snapshots = repo / "snapshots"
    if commit.isalnum() and (snapshots / commit).is_dir():
        return snapshots / commit
    try:
        found = [p for p in snapshots.iterdir() if p.is_dir()]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None
    except OSError:
        return None
