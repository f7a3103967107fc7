"""Models in the Hugging Face hub cache (`hf_snapshots` reads its layout): each GGUF
of a repo's current snapshot, named `{user}/{repo}:{quant}` (and
`hf.co/{user}/{repo}:{quant}`, as Ollama names Hugging Face models)."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from llamad.library.check import check_file
from llamad.library.folder import group_models
from llamad.library.hf_snapshots import read_cache
from llamad.library.model import Found, LibraryModel
from llamad.library.names import valid_name
from llamad.library.pulled import Pulled, owns
from llamad.library.refs import DEFAULT_QUANT

HF_PREFIX = "hf.co/"


def default_cache(environ: dict[str, str] | None = None) -> Path:
    """`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    return Path(home).expanduser() / "hub"


def is_cache(root: Path) -> bool:
    """Whether `root` looks like a hub cache: it holds `models--*` folders."""
    try:
        return any(p.name.startswith("models--") for p in root.iterdir())
    except OSError:
        return False


def scan_cache(root: Path, pulled: Pulled | None = None) -> Found:
    """Every GGUF model in the cache at `root`; the files in `pulled` are llamad's own."""
    found = Found()
    for revision in read_cache(root, found.warnings):
        files = [(p, check_file(p)) for p in revision.files]
        by_dir: dict[Path, list[Any]] = defaultdict(list)
        for item in files:
            by_dir[item[0].parent].append(item)
        snapshot = revision.path
        taken: set[str] = set()
        models = []
        for group in by_dir.values():
            for m in _renamed(
                revision.repo_id, group_models(group, "hf", found.warnings), found, taken
            ):
                # llamad's own when it pulled every file of the model, projector too.
                names = [p.relative_to(snapshot).as_posix() for p in _files(m)]
                mine = owns(pulled or {}, revision.repo_id, names)
                models.append(replace(m, source="pulled:hf", pulled=True) if mine else m)
        found.models += _with_default(revision.repo_id, models)
    return found


def _with_default(repo_id: str, models: list[LibraryModel]) -> list[LibraryModel]:
    """The repo's own name (`hf.co/user/repo`, `:latest` too) for the quant Ollama pulls
    when none is named, Q4_K_M, or for the repo's only model, as a pull picks it."""
    usable = [m for m in models if m.problem is None]
    default = [m for m in usable if (m.quant or "").upper() == DEFAULT_QUANT] or (
        usable if len(models) == 1 else []
    )
    if not default:
        return models
    bare = (repo_id, f"{repo_id}:latest")
    extra = (*bare, *(HF_PREFIX + n for n in bare))
    return [replace(m, aliases=(*m.aliases, *extra)) if m is default[0] else m for m in models]


def _files(m: LibraryModel) -> list[Path]:
    return [*m.parts, *([m.mmproj] if m.mmproj else [])]


def _renamed(
    repo_id: str, models: list[LibraryModel], found: Found, taken: set[str]
) -> list[LibraryModel]:
    """`{repo}:{quant}` (the file's name when two files share a quant) for each model."""
    out = []
    for m in models:
        tag = m.quant if m.quant and m.quant.lower() not in taken else m.name
        taken.add(tag.lower())
        name = f"{repo_id}:{tag}"
        if not valid_name(name):
            found.warnings.append(f"{m.path!s}: model name {name!r} is not usable; skipped")
            continue
        out.append(
            LibraryModel(
                name=name,
                source=m.source,
                path=m.path,
                parts=m.parts,
                mmproj=m.mmproj,
                size=m.size,
                quant=m.quant,
                aliases=_aliases(repo_id, tag, m.quant),
                problem=m.problem,
            )
        )
    return out


def _aliases(repo_id: str, tag: str, quant: str | None) -> tuple[str, ...]:
    """`hf.co/` as Ollama names them, and a quant tag in upper and lower case too: a
    request may spell `Q4_K_M` either way whatever the file's name says."""
    tags = [tag]
    if quant is not None and tag == quant:
        tags += [t for t in dict.fromkeys((tag.upper(), tag.lower())) if t != tag]
    names = [f"{repo_id}:{t}" for t in tags]
    return (*(HF_PREFIX + n for n in names), *names[1:])
