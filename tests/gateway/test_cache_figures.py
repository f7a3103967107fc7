"""A model's prompt cache figures where people look: after a restart restores its slot
and the next turn reuses it, status, `/metrics` and `llamactl cache` each show the
restores, the hits, the tokens saved, the restore time (p50, p95) and the bytes on
disk (the page's line: tests/gateway/test_page.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cache_helpers import restart_between_turns
from gateway_helpers import Gw, gateway
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(120)

ONE = {"ctx_size": 1024, "n_parallel": 1}


@pytest.fixture
def restored(tiny_model: Path) -> Iterator[tuple[Gw, dict[str, Any]]]:
    """A gateway whose `tiny` answered a turn, restarted (its slot saved and restored),
    and answered the same conversation's next turn from the restored cache; with that
    turn's timings."""
    with gateway(tiny_model, {"tiny": ONE}) as gw:
        yield gw, restart_between_turns(gw, "tiny")


def test_status_metrics_and_llamactl_show_the_restores(restored: tuple[Gw, dict[str, Any]]) -> None:
    gw, timings = restored
    assert timings["cache_n"] > 200, timings  # the restore paid
    cache = gw.ld.instance("tiny")["prompt_cache"]
    figures = cache["restores"]
    assert (figures["restores"], figures["hits"], figures["misses"]) == (1, 1, 0)
    assert figures["tokens_saved"] == timings["cache_n"]
    assert figures["restore_ms_p50"] is not None
    assert figures["restore_ms_p95"] is not None
    assert figures["stopped"] is None
    assert cache["bytes"] > 0
    samples = _scrape(gw)
    assert samples["llamad_cache_restores_total", "hit"] == 1
    assert samples["llamad_cache_tokens_saved_total", ""] == timings["cache_n"]
    assert samples["llamad_cache_restore_seconds_count", ""] == 1
    p50 = samples["llamad_cache_restore_seconds", "0.5"]
    assert p50 == pytest.approx(figures["restore_ms_p50"] / 1000)
    assert samples["llamad_cache_bytes", ""] == cache["bytes"]
    assert samples["llamad_cache_stopped", ""] == 0
    out = gw.ld.ctl("cache").stdout
    line = next(x for x in out.splitlines() if x.startswith("tiny: "))
    assert line.startswith(f"tiny: 1 restores, 1 reused, 0 not, {timings['cache_n']} tokens saved")
    assert "ms p50/p95" in line
    assert line.endswith("on disk")


def _scrape(gw: Gw) -> dict[tuple[str, str], float]:
    """`tiny`'s cache samples in `/metrics`, by name and outcome or quantile."""
    transport = httpx.HTTPTransport(uds=str(gw.ld.socket))
    with httpx.Client(transport=transport, base_url="http://llamad") as client:
        text = client.get("/metrics", timeout=5).text
    return {
        (s.name, s.labels.get("outcome") or s.labels.get("quantile") or ""): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("llamad_cache") and s.labels.get("name") == "tiny"
    }
