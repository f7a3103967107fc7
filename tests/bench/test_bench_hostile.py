"""The hostile-neighbour section in a smoke run: every attack for a second on the real
llama-server's tiny model, each row there with its target. Nothing here is judged: the
figures depend on the build (and on main they show the damage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import hostile
from bench.common import Context


@pytest.mark.timeout(240)
def test_every_attack_runs_stops_itself_and_gives_its_rows(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    short = tmp_path / "s"
    short.mkdir()
    ctx = Context(root=tmp_path, short=short, model=tiny_model, binary=llama_server, quick=True)
    rows = hostile.measure(ctx, 1.0, hostile.ATTACKS)
    names = [r.name for r in rows]
    assert names == [
        f"hostile {name}: {what}"
        for name, _, _ in hostile.ATTACKS
        for what in ("/v1/completions p99", "/health p99", "RSS growth")
    ]
    for row in rows:
        assert row.target != "-"
        assert row.limit is not None
        assert len(row.samples) == 1
        assert row.samples[0] == row.samples[0]  # a figure, never NaN
        json.dumps(row.to_dict(), allow_nan=False)
    memory = [r for r in rows if r.name.endswith("RSS growth")]
    # Each attacker made its connections and reported them.
    assert all(r.extra["attacker"].get("tries", 0) >= 1 for r in memory)
    spread = next(r for r in memory if "N4" in r.name)
    assert spread.extra["attacker"]["most_at_once"] > 1000


def test_p99_of_few_samples_is_near_their_largest() -> None:
    assert hostile.p99([5.0]) == 5.0
    assert hostile.p99([1.0, 2.0, 3.0, 100.0]) > 90.0
    assert hostile.p99([float(i) for i in range(1, 201)]) == pytest.approx(198.01)
