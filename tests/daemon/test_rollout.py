"""A rolling update loses nothing (issue #52): two real llamads on loopback behind a
stand-in for kube-proxy, 8 clients; the old pod's readiness turns at SIGTERM while it
still serves, its requests in flight finish, its slots are saved, then it exits."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from bench import rollout
from bench.common import Context

pytestmark = [pytest.mark.timeout(240), pytest.mark.process]


def test_a_rolling_update_under_load_loses_no_request(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    short = Path(tempfile.mkdtemp(prefix="ro-", dir="/tmp"))  # AF_UNIX paths are short
    ctx = Context(root=tmp_path, short=short, model=tiny_model, binary=llama_server, quick=True)
    try:
        got = rollout.play(ctx, before=40, after=40)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    lost = [o for o in got.outcomes if o.lost]
    assert lost == [], f"{len(lost)} of {len(got.outcomes)} lost, e.g. {lost[:3]}"
    a, b = got.front.pods
    # Both pods served clients through the front; the old one said "stopping" while it
    # still answered (its probe saw 503, not a refused connection first).
    assert got.front.connections[a] > 0
    assert got.front.connections[b] > 0
    assert got.front.saw(a, 503)
    # The stream in flight at SIGTERM ended whole, after the delay.
    assert got.long.get("status") == 200, got.long
    assert got.long.get("done"), got.long
    assert got.long["chunks"] > 1
    # Drained, then the slots saved as the instance stopped, then a clean exit.
    stopping, saved = got.old_events["gateway.stopping"], got.old_events["cache.stop_saved"]
    assert len(stopping) == 1
    assert saved
    assert saved[0]["slots"] >= 1
    assert stopping[0]["timestamp"] < saved[0]["timestamp"]
    assert got.old_events["listener.requests_cut"] == []
    assert got.old_exit == 0
    lost_row, duration_row = rollout.rows(got)
    assert lost_row.passed is True
    assert duration_row.samples[0] > rollout.SHUTDOWN_DELAY_S
