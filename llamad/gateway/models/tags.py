"""Ollama's tags on model names: the one rule for what a tagged name means.

The Ollama listing writes every untagged name with `:latest` (`tagged`), and apps that
list with `/api/tags` then ask by that name on any route of any family. So a name no
model answers to that ends in `:latest` means the name without it (`meant`); the answer
still carries the name the client used (`naming.Renamer`).
"""

from __future__ import annotations

from collections.abc import Callable

LATEST = ":latest"


def tagged(name: str) -> str:
    """The name as Ollama clients expect it: with a tag (`:latest` when it has none)."""
    return name if ":" in name else name + LATEST


def meant(name: str, known: Callable[[str], bool]) -> str:
    """The name a request for `name` means: itself when a model answers to it (a
    configured `m:latest` stays itself), else without a `:latest` tag."""
    if name.endswith(LATEST) and not known(name):
        return name.removesuffix(LATEST)
    return name
