"""The returning conversation's rows, without a model: the targets judged as issue #38
states them."""

from __future__ import annotations

from bench.realmodel_client import Turn
from bench.returning_rows import Measured, Stop, rows


def _measured(kill_evaluated: int, save_ms: float) -> Measured:
    m = Measured(first=1500)
    after = {"evicted": 1.0, "idle-stopped": 1.8, "upgraded": 1.0, "daemon restarted": 1.0}
    m.after = {what: [(Turn(s, 26, 1550), 26)] for what, s in after.items()}
    m.after["kill -9"] = [(Turn(1.5, kill_evaluated, 1550), 26)]
    m.warm = {what: [(Turn(1.1, 25, 1500), 25)] for what in m.after}
    m.load = {what: [4.0] for what in m.after}
    m.nocache = (Turn(20.0, 1600, 0), 26)
    m.claude = (20, 20)
    m.saves = [Stop(save_ms, 13_000_000, 13_000_000, 250.0)]
    return m


def test_each_target_is_judged_on_its_own_figure() -> None:
    got = {r.name.split(": ", 1)[1]: r for r in rows(1500, _measured(52, 29.0))}
    assert got["warm turn"].passed is None  # information only
    assert got["after evicted"].passed is True  # 1.0 s against its 1.1 s warm turn
    assert got["after idle-stopped"].passed is False  # 1.8 s: over 1.5x warm
    assert got["after daemon restarted"].passed is True  # 26 evaluated of 26 added
    assert got["after kill -9"].passed is False  # 52 of 26: an older save restored
    assert got["Claude Code 2nd turn"].passed is True
    assert got["save at idle stop"].passed is False  # 29 ms for 13 MB: 223 ms per 100 MB
    assert rows(1500, _measured(26, 6.0))[-1].passed is True


def test_ten_times_faster_than_no_cache_is_part_of_the_time_target() -> None:
    m = _measured(26, 6.0)
    m.nocache = (Turn(5.0, 1600, 0), 26)  # 5x the evicted turn's time only
    evicted = next(r for r in rows(1500, m) if r.name.endswith("after evicted"))
    assert evicted.passed is False


def test_a_stop_that_found_its_slot_saved_is_judged_on_its_step() -> None:
    """The stop wrote nothing (the background save had the slot): its step's 1 ms is
    weighed against the 12 MB the slot keeps on disk, not against what it wrote."""
    m = _measured(26, 1.0)
    m.saves = [Stop(1.0, 0, 12_000_000, 66.0)]
    m.background = [(7.0, 5.0, 12_000_000)]
    save = rows(1500, m)[-1]
    assert save.passed is True
    assert "writing [0.0] MB, for [12.0] MB kept" in save.note
