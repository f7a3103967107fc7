"""The docs as the tests read them: the pages, their headings and anchors, their links.

Anchors are computed as mkdocs computes them (Python-Markdown's `toc` extension): the
heading's text without its markup, slugified, with `_1`, `_2` ... for repeats.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{1,3})(\S(?:.*?\S)?)\1")
_TAG = re.compile(r"<[^>]+>")
_LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REPEAT = re.compile(r"^(.*)_([0-9]+)$")


@dataclass(frozen=True)
class Heading:
    """One heading of a page: its level, its text as written, and where it is."""

    level: int
    text: str
    line: int


@dataclass(frozen=True)
class Link:
    """One link of a page: its target as written, and the line it is on."""

    target: str
    line: int


def pages() -> list[Path]:
    """Every page the link check covers: README.md, CONTRIBUTING.md and docs/*.md."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            yield number, line


def headings(path: Path) -> list[Heading]:
    """The page's ATX headings (`## Title`), in order."""
    found = []
    for number, line in prose(path):
        match = _HEADING.match(line)
        if match:
            found.append(Heading(len(match.group(1)), match.group(2), number))
    return found


def plain(text: str) -> str:
    """A heading's text as rendered, without markup: code spans keep their content."""
    spans: list[str] = []

    def stash(match: re.Match[str]) -> str:
        spans.append(match.group(2).strip())
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE_SPAN.sub(stash, text)
    text = _LINK_TEXT.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _TAG.sub("", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def slugify(text: str) -> str:
    """Python-Markdown's default slug: ASCII, word characters, hyphens, lower case."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> list[str]:
    """The id of each heading of the page, in order, repeats numbered as toc does."""
    seen: set[str] = set()
    ids = []
    for heading in headings(path):
        anchor = slugify(plain(heading.text))
        while anchor in seen or not anchor:
            repeat = _REPEAT.match(anchor)
            anchor = f"{repeat.group(1)}_{int(repeat.group(2)) + 1}" if repeat else f"{anchor}_1"
        seen.add(anchor)
        ids.append(anchor)
    return ids


def links(path: Path) -> list[Link]:
    """Every inline link and image target outside code, as written."""
    found = []
    for number, line in prose(path):
        bare = _CODE_SPAN.sub("", line)
        found += [Link(m.group(1), number) for m in _LINK_TARGET.finditer(bare)]
    return found


def section(path: Path, title: str) -> str:
    """The text under the first heading containing `title`, down to the next heading of
    the same or a higher level (its subsections included)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = headings(path)
    for i, heading in enumerate(found):
        if title in plain(heading.text):
            end = next((h.line for h in found[i + 1 :] if h.level <= heading.level), None)
            return "\n".join(lines[heading.line : (end - 1) if end else None])
    raise LookupError(f"{path.name} has no heading with {title!r}")
