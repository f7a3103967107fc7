"""One model the library found: where it comes from, its files, and why it cannot be
served when it cannot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamad.backends.prompt import PromptDefaults

# Where a model comes from, as `llamactl models` shows it.
Source = str  # "folder", "lmstudio", "ollama", "hf", "pulled:hf", "pulled:ollama"


@dataclass(frozen=True)
class LibraryModel:
    """A model found on disk. `problem` set: listed with it, never routable."""

    name: str
    source: Source
    path: Path  # the file llama-server is given (the first part of a split model)
    parts: tuple[Path, ...] = ()  # every file of the model, the projector aside
    mmproj: Path | None = None
    size: int = 0  # bytes, every part and the projector together
    quant: str | None = None
    aliases: tuple[str, ...] = ()
    # llama-server settings the store gives the model (Ollama's params: num_ctx, temperature).
    settings: dict[str, Any] = field(default_factory=dict)
    # A store's system prompt and stop words, added to each request (Ollama's layers).
    prompt: PromptDefaults | None = None
    # Servable, but not quite as its store meant (an Ollama template not recognised).
    note: str | None = None
    problem: str | None = None
    # Removable by `llamactl rm` / DELETE /api/delete: llamad pulled it.
    pulled: bool = False

    def to_dict(self, loaded: bool = False) -> dict[str, Any]:
        """The model as `GET /v1/library` lists it."""
        return {
            "name": self.name,
            "source": self.source,
            "path": str(self.path),
            "mmproj": str(self.mmproj) if self.mmproj else None,
            "size_bytes": self.size,
            "quantization": self.quant,
            "aliases": list(self.aliases),
            "problem": self.problem,
            "note": self.note,
            "pulled": self.pulled,
            "loaded": loaded,
        }


@dataclass
class Found:
    """What one scan found: models, and one line per thing it could not read."""

    models: list[LibraryModel] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, other: Found) -> None:
        """Append another scan's findings."""
        self.models += other.models
        self.warnings += other.warnings
