"""etc/llamad.schema.json is the config's JSON Schema as the code generates it, and the
shipped config files pass it (what an editor checking them would say)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from llamad.config.json_schema import render

ETC = Path(__file__).parents[2] / "etc"
COMMITTED = ETC / "llamad.schema.json"


def test_the_committed_schema_is_what_the_code_generates() -> None:
    assert COMMITTED.read_text() == render(), "stale: run `make schema`"


def test_make_schema_writes_it() -> None:
    """`make schema` runs the module; its output is the file."""
    run = subprocess.run(
        [sys.executable, "-m", "llamad.config.json_schema"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert run.stdout == COMMITTED.read_text()
    makefile = (ETC.parent / "Makefile").read_text()
    assert "llamad.config.json_schema > etc/llamad.schema.json" in makefile


@pytest.mark.parametrize("name", ["llamad.example.toml", "llamad.minimal.toml"])
def test_the_shipped_configs_pass_the_schema(name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(COMMITTED.read_text())
    jsonschema.validate(tomllib.loads((ETC / name).read_text()), schema)


def test_the_schema_catches_a_misspelt_key() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(COMMITTED.read_text())
    with pytest.raises(jsonschema.ValidationError, match="idle_timout"):
        jsonschema.validate({"library": {"idle_timout": 5}}, schema)
