"""The hybrid row, run as `make bench` runs it (quick): on the tiny Mamba, no byte is
saved after the first restore showed it reuses nothing."""

from __future__ import annotations

import pytest

from bench import hybrid
from bench.common import Context

pytestmark = pytest.mark.timeout(120)


def test_no_byte_is_saved_per_turn_once_the_restores_stopped(quick_ctx: Context) -> None:
    (row,) = hybrid.run(quick_ctx)
    assert row.samples == [0.0, 0.0]
    assert row.floor[0] > 0  # the one save before the verdict
    assert row.passed is True
