"""The docs site builds with `mkdocs build --strict`: no broken link, anchor or snippet."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import ROOT

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs (the docs group) is not installed"
)


@needs_mkdocs
@pytest.mark.timeout(180)
def test_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (site / "config" / "index.html").is_file()
    # The snapshot of `llamactl top` is included from docs/top.txt, not copied by hand.
    assert "IN-FLIGHT" in (site / "page" / "index.html").read_text()
