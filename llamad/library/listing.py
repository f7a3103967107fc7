"""The library as the daemon holds it after a load: every model found, which instance
serves each, the ports given, and what was skipped and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import structlog

from llamad.library.model import LibraryModel

log = structlog.get_logger("llamad.library")


@dataclass(frozen=True)
class Library:
    """The resolved `[library]`: settings and what its last scan found."""

    places: tuple[Path, ...]
    pull_dir: Path
    registry: str  # Ollama's registry, for pulls
    models: tuple[LibraryModel, ...] = ()
    # Library model name -> the instance that serves it (itself, or a configured one).
    served: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    # One line per model skipped or folder not read: logged once, shown by `llamactl models`.
    notes: tuple[str, ...] = ()

    def find(self, name: str) -> LibraryModel | None:
        """The model named `name` (or with it as an alias; `:latest` implied)."""
        wanted = {name.lower(), name.removesuffix(":latest").lower()}
        for m in self.models:
            if wanted & {n.lower() for n in (m.name, *m.aliases)}:
                return m
        return None


def log_changes(old: Library | None, new: Library | None) -> None:
    """One event per note, model found or model gone since `old` (all of them at start)."""
    if new is None:
        return
    before = set(old.notes) if old else set()
    for note in new.notes:
        if note not in before:
            log.warning("library.skipped", reason=note)
    had = {m.name: m for m in old.models} if old else {}
    now = {m.name: m for m in new.models}
    for name, m in now.items():
        if name not in had or had[name] != m:
            if m.problem:
                log.warning("library.unusable", model=name, path=str(m.path), reason=m.problem)
            else:
                said = {"note": m.note} if m.note else {}  # served, not quite as its store meant
                log.info("library.found", model=name, path=str(m.path), source=m.source, **said)
    for name in had.keys() - now.keys():
        log.info("library.gone", model=name)
