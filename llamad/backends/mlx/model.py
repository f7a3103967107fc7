"""Where an MLX model is (a local directory, or a Hugging Face repo id already cached),
and keeping requests on it.

mlx_lm.server would download a repo id it lacks; llamad runs it with HF_HUB_OFFLINE=1 and
checks here, before starting, that the model resolves locally. It also loads whatever a
request names in `model`, `draft_model` or `adapters`, for every client, so a proxy pins
`model` to "default_model" (the server's own name for the model on its command line)
and drops the other two.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from llamad.common.paths import anchored
from llamad.common.storefile import read_small

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
WEIGHTS = ("*.safetensors",)
DEFAULT_MODEL = "default_model"
_SWITCHING = ("draft_model", "adapters")


@dataclass(frozen=True)
class MlxModel:
    """A model that resolved locally: what to pass as --model and where its files are."""

    argument: str  # the directory, or the repo id (served from the cache)
    directory: Path  # holds config.json and the weights
    hub_cache: Path  # HF_HUB_CACHE for the server; it must exist

    def weight_files(self) -> tuple[Path, ...]:
        """The weight files, sorted: their total size is the model's memory estimate."""
        return tuple(sorted(p for g in WEIGHTS for p in self.directory.glob(g)))


def hub_cache() -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or str(Path("~/.cache/huggingface").expanduser())
    return Path(home).expanduser() / "hub"


def resolve_model(value: str, cache: Path, base: Path) -> MlxModel:
    """`value` as a local directory (a relative one from `base`, the config file's
    directory) or a repo id in the hub `cache`.

    Raises ValueError with one line saying what is missing."""
    text = value.strip()
    directory = anchored(text, base)
    local = text.startswith(("/", ".", "~")) or not _REPO_ID.match(text)
    if not local and not directory.exists():
        return MlxModel(text, _cached_snapshot(text, cache), cache)
    if not directory.is_dir():
        raise ValueError(f"MLX model directory not found: {directory}")
    _check_files(directory)
    return MlxModel(str(directory), directory, cache)


def _cached_snapshot(repo: str, cache: Path) -> Path:
    root = cache / ("models--" + repo.replace("/", "--"))
    hint = f"run `hf download {repo}` once, or give a local directory"
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        raise ValueError(f"{repo} is not in the Hugging Face cache {cache}: {hint}")
    try:
        wanted = read_small(root / "refs" / "main", 4096).decode("ascii").strip()
    except (OSError, ValueError):
        wanted = ""
    found = [snapshots / wanted] if wanted else sorted(snapshots.iterdir())
    for snapshot in found:
        if (snapshot / "config.json").is_file():
            _check_files(snapshot)
            return snapshot
    raise ValueError(f"{repo} is only partly in the Hugging Face cache {cache}: {hint}")


def _check_files(directory: Path) -> None:
    if not (directory / "config.json").is_file():
        raise ValueError(f"not an MLX model: {directory} has no config.json")
    if not any(next(directory.glob(g), None) for g in WEIGHTS):
        raise ValueError(f"not an MLX model: {directory} has no *.safetensors weights")


def pin_model(body: bytes) -> bytes:
    """`body` with `model` pinned and the model-switching fields dropped; a body that is
    not a JSON object is passed on unchanged (the server answers it with its own error)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    doc["model"] = DEFAULT_MODEL
    for key in _SWITCHING:
        doc.pop(key, None)
    return json.dumps(doc).encode()
