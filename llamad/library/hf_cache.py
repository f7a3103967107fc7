"""Models in the Hugging Face hub cache, read with `huggingface_hub.scan_cache_dir()`:
each GGUF of a repo's current snapshot, named `{user}/{repo}:{quant}` (and
`hf.co/{user}/{repo}:{quant}`, as Ollama names Hugging Face models)."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from llamad.library.check import check_file
from llamad.library.folder import group_models
from llamad.library.model import Found, LibraryModel
from llamad.library.names import valid_name
from llamad.library.walk import is_partial

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


def scan_cache(root: Path, pulled: frozenset[str] = frozenset()) -> Found:
    """Every GGUF model in the cache at `root`; repos in `pulled` are llamad's own pulls."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    found = Found()
    try:
        info = scan_cache_dir(root)
    except (CacheNotFound, OSError, ValueError) as exc:
        found.warnings.append(f"{root}: cannot read the Hugging Face cache: {exc}")
        return found
    found.warnings += [f"{root}: {w}" for w in info.warnings]
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        revision = _current(repo)
        files = [
            (Path(f.file_path), check_file(Path(f.file_path)))
            for f in sorted(revision.files, key=lambda f: str(f.file_path))
            if f.file_name.lower().endswith(".gguf") and not is_partial(f.file_name)
        ]
        by_dir: dict[Path, list[Any]] = defaultdict(list)
        for item in files:
            by_dir[item[0].parent].append(item)
        source = "pulled:hf" if repo.repo_id in pulled else "hf"
        for group in by_dir.values():
            found.models += _renamed(
                repo.repo_id, group_models(group, source, found.warnings), found
            )
    return found


def _current(repo: Any) -> Any:
    """The revision `main` points at, else the newest one."""
    for rev in repo.revisions:
        if "main" in rev.refs:
            return rev
    return max(repo.revisions, key=lambda r: r.last_modified)


def _renamed(repo_id: str, models: list[LibraryModel], found: Found) -> list[LibraryModel]:
    out = []
    taken: set[str] = set()
    for m in models:
        tag = m.quant if m.quant and m.quant not in taken else m.name
        taken.add(tag)
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
                aliases=(HF_PREFIX + name,),
                problem=m.problem,
                pulled=m.source.startswith("pulled"),
            )
        )
    return out
