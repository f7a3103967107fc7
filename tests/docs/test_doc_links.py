"""Every internal link of the docs resolves: relative files, and `#anchors` as mkdocs
makes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_pages import DOCS, ROOT, anchors, headings, links, pages, plain

_EXTERNAL = ("http://", "https://", "mailto:")


def broken_links(page: Path) -> list[str]:
    """One line per link of `page` that does not resolve."""
    problems = []
    shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    for link in links(page):
        if link.target.startswith(_EXTERNAL):
            continue
        where = f"{shown}:{link.line}: {link.target}"
        path, _, anchor = link.target.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            problems.append(f"{where}: no such file")
            continue
        if page.parent == DOCS and not target.is_relative_to(DOCS):
            problems.append(f"{where}: leaves docs/, which the site cannot follow")
        if anchor and (target.suffix != ".md" or anchor not in anchors(target)):
            problems.append(f"{where}: no heading with that anchor")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_internal_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    """The check itself: a missing file, a missing anchor and a good anchor."""
    (tmp_path / "other.md").write_text("# Other\n\n## The `[gateway]` table\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the-gateway-table) [no file](gone.md)\n"
        "[no anchor](other.md#nowhere) [here](#page)\n\n```\n[in code](gone.md)\n```\n"
    )
    assert [p.split(": ", 2)[-1] for p in broken_links(page)] == [
        "no such file",
        "no heading with that anchor",
    ]


def test_anchors_repeat_and_drop_markup(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('# A\n\n## MLX: `kind = "mlx"` here\n\n## A\n\n## A\n\n## **Bold** [x](y)\n')
    assert anchors(page) == ["a", "mlx-kind-mlx-here", "a_1", "a_2", "bold-x"]


def test_anchors_are_those_mkdocs_makes() -> None:
    """Python-Markdown's toc, which mkdocs uses, gives every page the same ids."""
    markdown = pytest.importorskip("markdown", reason="the docs group is not installed")
    for page in pages():
        md = markdown.Markdown(extensions=["toc", "tables", "fenced_code"])
        md.convert(page.read_text(encoding="utf-8"))
        ids: list[str] = []
        stack = list(reversed(md.toc_tokens))
        while stack:
            token = stack.pop()
            ids.append(token["id"])
            stack += reversed(token["children"])
        texts = [plain(h.text) for h in headings(page)]
        assert anchors(page) == ids, (page.name, texts)
