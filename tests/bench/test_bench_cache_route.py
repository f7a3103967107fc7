"""The cache-route rows, run as `make bench` runs them (quick): two one-slot replicas
both serve 8 clients' short prompts, and a long conversation's turns stay on the replica
holding it while that load runs."""

from __future__ import annotations

import pytest

from bench import cache_route
from bench.common import Context

pytestmark = pytest.mark.timeout(240)


def test_both_replicas_serve_and_the_conversation_stays_where_its_cache_is(
    quick_ctx: Context,
) -> None:
    both, turns = cache_route.run(quick_ctx)
    assert both.passed is True, both.note
    assert turns.samples == [0.0], turns.note
