"""The hybrid row, run as `make bench` runs it (quick): on the tiny Mamba, no byte is
saved after the first restore showed it reuses nothing."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from bench import hybrid
from bench.common import Context

pytestmark = pytest.mark.timeout(120)


def test_no_byte_is_saved_per_turn_once_the_restores_stopped(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    short = Path(tempfile.mkdtemp(prefix="hb-", dir="/tmp"))  # AF_UNIX paths are short
    ctx = Context(root=tmp_path, short=short, model=tiny_model, binary=llama_server, quick=True)
    try:
        (row,) = hybrid.run(ctx)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert row.samples == [0.0, 0.0]
    assert row.floor[0] > 0  # the one save before the verdict
    assert row.passed is True
