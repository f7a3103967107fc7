"""`llamactl models` says which library models run without a chat template of their own,
in the line status gives: a GGUF carrying none (of an architecture with no built-in one)
is named, one carrying its own is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from library_helpers import library_daemon

from llamad.daemon.tinymodel import write_tiny_model

pytestmark = pytest.mark.timeout(60)

NONE_LINE = "none: the model carries no chat template (llama); ChatML is used"


def test_llamactl_models_names_a_model_without_a_template(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "bare.gguf", chat_template=None)
    write_tiny_model(folder / "own.gguf")
    with library_daemon(f'[library]\ndirs = ["{folder}"]\n') as (ld, _):
        listing = ld.ctl("models").stdout
        doc = json.loads(ld.ctl("models", "--json").stdout)
    templates = {m["name"]: m["chat_template"] for m in doc["models"]}
    assert templates == {"bare": NONE_LINE, "own": "the model's own"}
    assert f"bare: chat template: {NONE_LINE}" in listing.splitlines()
    assert "own:" not in listing
