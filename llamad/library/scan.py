"""The library's folders and one scan over them: each folder read as what it is (an
Ollama store, the Hugging Face cache, or a plain folder), names unique, first folder wins."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llamad.library.folder import scan_folder
from llamad.library.hf_cache import default_cache, is_cache, scan_cache
from llamad.library.model import Found
from llamad.library.ollama_store import is_store, scan_store

# Where llamad keeps the Ollama models it pulls, inside the pull folder: hidden, so the
# folder's own scan never walks its blobs.
OLLAMA_PULLS = ".ollama"


@dataclass(frozen=True)
class Place:
    """One folder of the library; `default` ones that do not exist are not worth a word."""

    path: Path
    default: bool = False


def default_places(
    home: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Place]:
    """`~/models`, then Ollama's store, LM Studio's folder and the Hugging Face cache,
    each where its program keeps it (the scan skips those that do not exist)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    ollama = Path(env["OLLAMA_MODELS"]).expanduser() if env.get("OLLAMA_MODELS") else None
    places = [home / "models", ollama or home / ".ollama" / "models"]
    places += [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    places.append(default_cache(dict(env)))
    return [Place(p, default=True) for p in places]


def scan(places: list[Place], pull_dir: Path, pulled_repos: frozenset[str] = frozenset()) -> Found:
    """Every model in `places` (and llamad's own Ollama pulls under `pull_dir`); a name
    seen twice keeps its first folder, with a warning."""
    found = Found()
    owned = pull_dir / OLLAMA_PULLS
    todo = [*places, Place(owned, default=True)]
    seen: set[Path] = set()
    for place in todo:
        root = place.path
        try:
            real = root.resolve()
            exists = root.is_dir()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
            found.warnings.append(f"{root}: cannot read library folder: {exc}")
            continue
        if not exists:
            if not place.default:
                found.warnings.append(f"{root}: library folder not found")
            continue
        if real in seen:
            continue
        seen.add(real)
        found.add(_scan_one(root, owned, pulled_repos))
    return _unique(found)


def _scan_one(root: Path, owned: Path, pulled_repos: frozenset[str]) -> Found:
    if is_store(root):
        return scan_store(root, "pulled:ollama" if root == owned else "ollama")
    if is_cache(root) or root.name == "hub":
        return scan_cache(root, pulled_repos)
    text = str(root).lower()
    return scan_folder(root, "lmstudio" if "lmstudio" in text or "lm-studio" in text else "folder")


def _unique(found: Found) -> Found:
    out = Found(warnings=found.warnings)
    owner: dict[str, Path] = {}
    for model in found.models:
        names = (model.name, *model.aliases)
        clash = next((n for n in names if n in owner), None)
        if clash is not None:
            out.warnings.append(
                f"{model.path!s}: model name {clash!r} is already {owner[clash]}; skipped"
            )
            continue
        for n in names:
            owner[n] = model.path
        out.models.append(model)
    return out
