"""Deleting a model llamad pulled (`llamactl rm`, Ollama's `DELETE /api/delete`), and
nothing else: an Ollama-registry model in llamad's own store, or the Hugging Face files
its record names. Ollama's and LM Studio's stores, the files a person downloaded and the
files a configured instance names are refused, with where the file lives.

The plan is made first and checked whole; only then does anything go, the name first
(the manifest, the snapshot's link), so a scan never sees half a model.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from llamad.library.listing import Library
from llamad.library.model import LibraryModel
from llamad.library.ollama_store import blob_path, display_name, read_manifest
from llamad.library.pulled import forget
from llamad.library.scan import OLLAMA_PULLS

# Where a model that llamad did not pull lives, as a refusal names it.
_WHERE = {
    "ollama": "Ollama's store (remove it with `ollama rm`)",
    "lmstudio": "LM Studio's models folder (remove it in LM Studio)",
    "hf": "the Hugging Face cache, downloaded by someone else (`hf cache delete`)",
    "folder": "a folder of yours",
}


class RemoveError(Exception):
    """A model that cannot be removed; the message is one line for the person asking.
    409, not 403: llamactl reads a 403 as a read-only token."""

    status = 409
    code = "not_removable"


class NoSuchModel(RemoveError):
    """No library model has that name."""

    status = 404
    code = "model_not_found"


class Busy(RemoveError):
    """Being pulled, or still answering requests: not now."""

    code = "busy"


@dataclass(frozen=True)
class Plan:
    """What removing one model deletes, in order, and the record entries it drops."""

    model: LibraryModel
    instance: str | None  # the instance serving it, to unload first
    files: tuple[Path, ...]  # names first (manifest, snapshot links), then blobs
    repo: str | None = None  # a Hugging Face pull: its record entry
    names: tuple[str, ...] = ()


def plan(lib: Library, name: str) -> Plan:
    """What `rm name` deletes; RemoveError when it must not (or there is nothing)."""
    model = lib.find(name)
    if model is None:
        raise NoSuchModel(f"no model named {name!r} in the library (`llamactl models` lists it)")
    served = lib.served.get(model.name)
    if served is not None and served != model.name:
        raise RemoveError(
            f"{model.name}: instances.{served} in the config file serves {model.path}; "
            "llamad never deletes a file the config names"
        )
    if model.source == "pulled:ollama":
        return _ollama(lib.pull_dir / OLLAMA_PULLS, model, served)
    if model.source == "pulled:hf":
        return _hf(lib, model, served)
    where = _WHERE.get(model.source, "a folder llamad does not own")
    raise RemoveError(
        f"{model.name}: not pulled by llamad; its file {model.path} is in {where}. "
        "llamad deletes only the models it pulled"
    )


def _ollama(store: Path, model: LibraryModel, served: str | None) -> Plan:
    """The manifest, then every blob no other manifest of llamad's store uses."""
    target, mine, others = None, set(), set()
    for path in sorted((store / "manifests").glob("*/*/*/*")):
        digests = _digests(path)
        if display_name(*path.relative_to(store / "manifests").parts) == model.name:
            target, mine = path, digests
        else:
            others |= digests
    if target is None:
        raise NoSuchModel(f"{model.name}: its manifest is already gone from {store}")
    blobs = [b for d in sorted(mine - others) if (b := blob_path(store, d)) and b.exists()]
    return Plan(model, served, (target, *blobs))


def _digests(manifest: Path) -> set[str]:
    try:
        doc = read_manifest(manifest)
        layers = [doc.get("config") or {}, *doc.get("layers", [])]
        return {str(x["digest"]) for x in layers if isinstance(x, dict) and "digest" in x}
    except (OSError, ValueError, AttributeError, TypeError):
        return set()


def _hf(lib: Library, model: LibraryModel, served: str | None) -> Plan:
    """The snapshot's links, then each blob no other link of the repo points at; the
    projector only when no other model beside it uses it."""
    links = list(model.parts)
    if model.mmproj and not any(o.mmproj == model.mmproj for o in lib.models if o != model):
        links.append(model.mmproj)
    snapshot = next(p for p in links[0].parents if p.parent.name == "snapshots")
    repo_dir = snapshot.parent.parent
    going = {Path(os.path.realpath(p)) for p in links}
    kept = {
        Path(os.path.realpath(p))
        for p in (repo_dir / "snapshots").rglob("*")
        if p.is_symlink() and p not in links
    }
    names = tuple(p.relative_to(snapshot).as_posix() for p in links)
    repo = model.name.split(":", 1)[0]
    return Plan(model, served, (*links, *sorted(going - kept)), repo, names)


def delete(p: Plan, pull_dir: Path) -> int:
    """Delete what `p` names (a file already gone is fine); returns the bytes freed."""
    freed = 0
    for path in p.files:
        with contextlib.suppress(FileNotFoundError):
            if not path.is_symlink():
                freed += path.stat().st_size
            path.unlink()
        _prune(path.parent)
    if p.repo is not None:
        forget(pull_dir, p.repo, p.names)
    return freed


def _prune(folder: Path) -> None:
    """Empty folders left behind go (a manifest's model and namespace, a snapshot's
    sub-folder), up to the first that is not empty."""
    while folder.name not in ("manifests", "snapshots", "blobs"):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (or not ours to remove)
        folder = folder.parent
