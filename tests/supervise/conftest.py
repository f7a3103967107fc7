"""Fixtures of the supervision tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, llama_server: Path) -> None:
    """The fake server answers --help as the real one, for the option catalogue."""
    monkeypatch.setenv("FAKE_REAL_SERVER", str(llama_server))
