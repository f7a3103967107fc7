"""Whether restores pay, as a table: the request after a restore judges it by what it
took from the cache; misses in a row (one for a hybrid architecture) stop the model and
build's saves, a hit resets the count, a shorter prompt says nothing, a new build tries
again, and a stop outlives the process."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamad.supervise.slot_verdicts import Verdicts

pytestmark = pytest.mark.timeout(10)


def fit(build: str = "b1") -> dict[str, object]:
    return {"model": {"path": "/m.gguf", "size": 1, "mtime_ns": 2}, "build": build}


# (tokens restored, then each next request's (cached, evaluated)) -> stopped after each.
CASES = {
    "a hit": (1000, [(1000, 20)], [False]),
    "half is a hit": (1000, [(500, 600)], [False]),
    "two misses stop": (1000, [(0, 1020), (0, 1020)], [False, True]),
    "a hit between misses": (1000, [(0, 1020), (990, 30), (0, 1020)], [False, False, False]),
    "a shorter prompt says nothing": (1000, [(0, 200), (0, 200)], [False, False]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_request_after_each_restore_judges_it(case: str, tmp_path: Path) -> None:
    restored, turns, expected = CASES[case]
    v = Verdicts()
    got = []
    for cached, evaluated in turns:
        v.fits("m", fit(), tmp_path, None)  # a new process each turn
        v.restored("m", restored, 12.0)
        v.served("m", cached, evaluated, tmp_path)
        got.append(v.stopped("m") is not None)
    assert got == expected


def test_a_hybrid_architecture_stops_at_its_first_miss_and_says_why(tmp_path: Path) -> None:
    v = Verdicts()
    v.fits("q", fit(), tmp_path, "qwen35")
    v.restored("q", 14906, 120.0)
    assert v.served("q", 0, 14950, tmp_path)
    why = v.stopped("q")
    assert why is not None
    assert "qwen35 is a hybrid or recurrent architecture" in why
    figures = v.of("q")
    assert figures is not None
    assert (figures["restores"], figures["misses"], figures["recurrent"]) == (1, 1, "qwen35")


def test_only_the_first_request_after_a_restore_counts(tmp_path: Path) -> None:
    v = Verdicts()
    v.fits("m", fit(), tmp_path, None)
    v.restored("m", 1000, 5.0)
    v.served("m", 1000, 10, tmp_path)
    for _ in range(3):  # later requests, whatever they reuse, judge nothing
        v.served("m", 0, 5000, tmp_path)
    figures = v.of("m")
    assert figures is not None
    assert (figures["hits"], figures["misses"], figures["tokens_saved"]) == (1, 0, 1000)
    assert figures["restore_ms_p50"] == 5.0


def test_a_stop_outlives_the_process_and_a_new_build_tries_again(tmp_path: Path) -> None:
    v = Verdicts()
    v.fits("m", fit(), tmp_path, "lfm2")
    v.restored("m", 800, 1.0)
    v.served("m", 0, 900, tmp_path)
    assert v.stopped("m") is not None
    again = Verdicts()  # the daemon restarted
    again.fits("m", fit(), tmp_path, "lfm2")
    assert again.stopped("m") == v.stopped("m")
    again.fits("m", fit(build="b2"), tmp_path, "lfm2")  # llama-server upgraded
    assert again.stopped("m") is None
