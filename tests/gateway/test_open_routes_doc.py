"""The pages name every route that answers without a key (issue #51: the page's files
were said to be the only ones), read from the door's own table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from door_helpers import build

from llamad.gateway.access.table import Need

DOCS = Path(__file__).parents[2] / "docs"
PAGE_FILES = {"/ui", "/ui/", "/ui/static/{name}"}  # "the page's own files"


@pytest.mark.parametrize("page", ["page.md", "security.md"])
def test_every_open_route_is_named(page: str, tmp_path: Path) -> None:
    app = build(tmp_path)
    opened = {r.path for r in app.door.table.routes if r.need is Need.OPEN}
    text = (DOCS / page).read_text()
    assert "files" in text
    for path in sorted(opened - PAGE_FILES):
        shown = re.search(rf"`(?:GET |HEAD )?{re.escape(path)}`", text)
        assert shown, f"docs/{page} does not name {path}"
