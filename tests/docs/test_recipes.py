"""Every config file of docs/recipes.md and docs/coming-from.md loads with the daemon's own
loader, so no recipe drifts from the code: each `toml` block is one whole file, its model
files are the tiny model and its key and token files private random keys, all under the
test's home."""

from __future__ import annotations

import re
import secrets
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_pages import DOCS, headings

from llamad.config.load import check

PAGE = DOCS / "recipes.md"
# Each page and how many config files it holds: a block that stops being `toml` is missed.
PAGES = {PAGE: 6, DOCS / "coming-from.md": 3}
_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def recipes() -> list[tuple[str, int]]:
    """(page name, block number) for every config file of every page."""
    return [(page.name, i) for page in PAGES for i in range(len(blocks(page)))]


def _paths(value: object) -> Iterator[str]:
    """Every string in the parsed file that names a file in the home (`~/...`)."""
    if isinstance(value, str) and value.startswith("~/"):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _paths(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _paths(inner)


def _furnish(text: str, home: Path, tiny_model: Path) -> None:
    """Put the files the recipe names where it names them."""
    for name in _paths(tomllib.loads(text)):
        path = home / name.removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".gguf":
            shutil.copyfile(tiny_model, path)
        else:  # a key or a token: private, and each a key of its own
            path.write_text(secrets.token_hex(32) + "\n")
            path.chmod(0o600)


def test_the_pages_have_their_files() -> None:
    """Five recipes, the two machines' files side by side: six files; one per program."""
    assert len([h for h in headings(PAGE) if h.level == 2]) == 5
    assert {page: len(blocks(page)) for page in PAGES} == PAGES


@pytest.mark.parametrize(("page", "number"), recipes())
@pytest.mark.timeout(120)
def test_config_is_valid(page: str, number: int, tmp_path: Path, tiny_model: Path) -> None:
    text = blocks(DOCS / page)[number]
    _furnish(text, tmp_path / "home", tiny_model)  # conftest makes tmp_path/home the HOME
    path = tmp_path / "llamad.toml"
    path.write_text(text)
    warnings: list[str] = []
    assert check(path, warnings) == []
    assert warnings == []
