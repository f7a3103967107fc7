"""What the bench's own tests share: a quick run's context."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import Context


@pytest.fixture
def quick_ctx(tmp_path: Path, tiny_model: Path, llama_server: Path) -> Iterator[Context]:
    """A `--quick` bench context under `tmp_path`, its sockets in a short /tmp directory
    (AF_UNIX paths are short), removed after."""
    short = Path(tempfile.mkdtemp(prefix="bq-", dir="/tmp"))
    try:
        yield Context(root=tmp_path, short=short, model=tiny_model, binary=llama_server, quick=True)
    finally:
        shutil.rmtree(short, ignore_errors=True)
