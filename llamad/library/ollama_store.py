"""Models in an Ollama store (`~/.ollama/models`): manifests named as Ollama names them,
the model layer's blob as the GGUF, a projector layer as mmproj, and the `params`,
`template` and `system` layers as Ollama takes them (`ollama_layers`).

Ollama's layout: `manifests/<host>/<namespace>/<model>/<tag>` (JSON, OCI-like) and
content-addressed `blobs/sha256-<hex>`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from llamad.backends.gguf_types import file_type_name
from llamad.common.storefile import read_small
from llamad.library.check import check_file
from llamad.library.model import Found, LibraryModel
from llamad.library.names import valid_name
from llamad.library.ollama_layers import PARAMS, SYSTEM, TEMPLATE, take_layers

DEFAULT_HOST = "registry.ollama.ai"
_MT = "application/vnd.ollama.image."
MODEL, PROJECTOR = _MT + "model", _MT + "projector"
# Layers llama-server has no use for (a `messages` history is not replayed).
_IGNORED = {_MT + t for t in ("license", "messages")}
_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
MAX_MANIFEST = 1 << 20


def is_store(root: Path) -> bool:
    """Whether `root` is laid out as an Ollama store."""
    return (root / "manifests").is_dir() and (root / "blobs").is_dir()


def display_name(host: str, namespace: str, model: str, tag: str) -> str:
    """Ollama's name: `library/` and the default host dropped, `:latest` left implicit."""
    if host == DEFAULT_HOST:
        base = model if namespace == "library" else f"{namespace}/{model}"
    else:
        base = f"{host}/{namespace}/{model}"
    return base if tag == "latest" else f"{base}:{tag}"


def blob_path(root: Path, digest: str) -> Path | None:
    """Where the blob `sha256:<hex>` lives in the store, or None for a malformed digest."""
    m = _DIGEST.match(digest)
    return root / "blobs" / f"sha256-{m[1]}" if m else None


def scan_store(root: Path, source: str = "ollama") -> Found:
    """Every manifest of the store at `root` as a model."""
    found = Found()
    manifests = root / "manifests"
    try:
        files = sorted(p for p in manifests.glob("*/*/*/*") if not p.name.startswith("."))
    except OSError as exc:
        found.warnings.append(f"{manifests}: cannot read: {exc.strerror or exc}")
        return found
    for path in files:
        host, namespace, model, tag = path.relative_to(manifests).parts
        name = display_name(host, namespace, model, tag)
        if not valid_name(name):
            found.warnings.append(f"{path!s}: Ollama model name {name!r} is not usable; skipped")
            continue
        try:
            doc = read_manifest(path)
        except (OSError, ValueError) as exc:
            found.warnings.append(f"{path}: unreadable Ollama manifest: {exc}")
            continue
        found.models.append(_model(root, name, doc, source))
    return found


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at `path`; OSError or ValueError when it is not one."""
    doc = json.loads(read_small(path, MAX_MANIFEST))
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list):
        raise ValueError("no `layers` list")
    return doc


def _model(root: Path, name: str, doc: dict[str, Any], source: str) -> LibraryModel:
    layers = [x for x in doc["layers"] if isinstance(x, dict)]
    kinds = {str(x.get("mediaType")) for x in layers}
    model_layers = [x for x in layers if x.get("mediaType") == MODEL]
    unknown = sorted(kinds - _IGNORED - {MODEL, PROJECTOR, PARAMS, SYSTEM, TEMPLATE})
    path = blob_path(root, str(model_layers[0].get("digest"))) if model_layers else None
    empty = LibraryModel(name, source, path or root)
    if unknown:
        return _with(empty, f"layers llama-server cannot load: {', '.join(unknown)}")
    if len(model_layers) != 1 or path is None:
        return _with(empty, f"expected one model layer, found {len(model_layers)}")
    check = check_file(path)
    mmproj = None
    for layer in layers:
        if layer.get("mediaType") == PROJECTOR:
            mmproj = blob_path(root, str(layer.get("digest")))
    mm_check = check_file(mmproj) if mmproj else None
    problem = check.problem
    if problem is None and mm_check is not None and mm_check.problem:
        problem = f"projector: {mm_check.problem}"
    blobs = {
        str(x.get("mediaType")): b
        for x in layers
        if x.get("mediaType") in (PARAMS, SYSTEM, TEMPLATE)
        and (b := blob_path(root, str(x.get("digest"))))
    }
    taken = take_layers(blobs, path) if check.problem is None else None
    return LibraryModel(
        name=name,
        source=source,
        path=path,
        parts=(path,),
        mmproj=mmproj,
        size=check.size + (mm_check.size if mm_check else 0),
        quant=file_type_name(check.file_type),
        settings=taken.settings if taken else {},
        prompt=taken.prompt if taken else None,
        note=taken.note if taken else None,
        problem=problem,
        pulled=source.startswith("pulled"),
    )


def _with(model: LibraryModel, problem: str) -> LibraryModel:
    return LibraryModel(model.name, model.source, model.path, problem=problem)
