"""`python -m bench --baseline REF`, without building REF: a stand-in "old" build runs
this checkout's llamad from the bench's own Python, apart from the checkout (cwd outside
it, no PYTHONPATH) as an old commit's would. Nothing here is timed."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import psutil
import pytest
from counting_servers import counting_servers

from bench import baseline, cold_start, concurrency, footprint, peer_rows
from bench.__main__ import main
from bench.base_build import CURRENT, BaselineError, Build, commit_of
from bench.common import Context, Result, instance_keys
from bench.procs import Daemon
from bench.targets import Target

OLD = Build("llamad@0ld0ld0", Path(sys.executable), "0ld0ld0" * 5)


def _ctx(tmp_path: Path, model: Path, binary: Path) -> Context:
    short = tmp_path / "s"
    short.mkdir()
    return Context(root=tmp_path, short=short, model=model, binary=binary, quick=True,
                   baseline=OLD)  # fmt: skip


def test_an_unknown_ref_is_one_line_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(BaselineError, match=r"^--baseline no-such-ref: no such commit in "):
        commit_of("no-such-ref")
    assert main(["--baseline", "no-such-ref", "--only", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --baseline no-such-ref: no such commit")
    assert err.count("\n") == 1


def test_the_old_build_runs_apart_from_the_checkout(
    tmp_path: Path, tiny_model: Path, llama_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A llamad on PYTHONPATH would be imported before the installed one: the old build's
    daemon must not see it, and runs in its own work dir, with the binary named."""
    poison = tmp_path / "poison"
    (poison / "llamad").mkdir(parents=True)
    (poison / "llamad" / "__init__.py").write_text("raise SystemExit('the wrong tree')\n")
    monkeypatch.setenv("PYTHONPATH", str(poison))
    ctx = _ctx(tmp_path, tiny_model, llama_server)
    daemon = Daemon(ctx, "old", {"t": instance_keys(ctx, ctx.port())}, build=OLD)
    try:
        daemon.wait_socket()  # it exits at once if it imports the poisoned tree
        daemon.wait_running(["t"], timeout=45.0)
        proc = psutil.Process(daemon.proc.pid)
        assert Path(proc.cwd()) == daemon.work
        assert "PYTHONPATH" not in proc.environ()
        assert f"llama_server = {str(llama_server)!r}".replace("'", '"') in (
            daemon.config.read_text()
        )
    finally:
        daemon.stop()


@pytest.mark.timeout(180)
def test_cold_start_and_footprint_take_both_builds_and_print_them_side_by_side(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    ctx = _ctx(tmp_path, tiny_model, llama_server)
    runs, floor = cold_start._measure(ctx, 1, 2)
    assert [len(r) for r in runs.values()] == [2, 2]
    assert len(floor) == 2
    rows = [baseline.twin(cold_start._row(1, r, floor), b) for b, r in runs.items()]
    for (build, n), (ours, base) in footprint.measure(ctx, {1: 5.0}).items():
        rows += [baseline.twin(r, build) for r in footprint._rows(n, 5.0, ours, base)]
    names = [r.name for r in rows]
    assert names == ["cold start", "cold start llamad@0ld0ld0", "footprint RSS",
                     "footprint USS", "idle CPU", "footprint RSS llamad@0ld0ld0",
                     "footprint USS llamad@0ld0ld0", "idle CPU llamad@0ld0ld0"]  # fmt: skip
    old = [r for r in rows if r.extra.get("build") == OLD.label]
    assert len(old) == 4
    assert all(r.passed is None for r in old)
    text = baseline.side_by_side(rows, OLD.label).splitlines()
    assert text[0].split() == ["measurement", "N", "llamad", OLD.label, "judged", "on"]
    assert [line.split("  ")[0] for line in text[2:]] == [
        "cold start", "footprint RSS", "footprint USS", "idle CPU"
    ]  # fmt: skip


def _row(name: str, samples: list[float], **extra: object) -> Result:
    return Result(name, 32, "s", samples, [1.0], "ratio", "ratio", 1.03, "-", extra=extra)


def test_side_by_side_pairs_each_old_row_with_its_new_one_on_the_judged_figure() -> None:
    label = OLD.label
    rows = [
        _row("concurrency 32 clients: llamad", [1.1], figures={"errors": 0}),
        _row(f"concurrency 32 clients: {label}", [1.2], figures={"errors": 3}),
        Result("peers: llamad CPU per request", 1, "us", [300.0], [0.0], "overhead", "none",
               None, "-"),
        Result(f"peers: {label} CPU per request", 1, "us", [280.0], [0.0], "overhead", "none",
               None, "-"),
        Result(f"peers: {label} SSE time", 5, "ms", [1.0], [1.0], "ratio", "none", None, "-"),
    ]  # fmt: skip
    ctx = Context(Path("/"), Path("/"), Path("m"), Path("b"), quick=True, baseline=OLD)
    baseline.mark_peer_rows(ctx, rows)
    assert rows[1].extra["beside"] == "concurrency 32 clients: llamad"
    assert "build" not in rows[0].extra
    lines = baseline.side_by_side(rows, label).splitlines()[2:]
    # The SSE row has no new twin in this run: it is not paired.
    assert [line.split() for line in lines] == [
        ["concurrency", "32", "clients:", "llamad", "32", "1.100x,", "0", "errors", "1.200x,",
         "3", "errors", "ratio"],
        ["peers:", "llamad", "CPU", "per", "request", "1", "+300.00", "us", "+280.00", "us",
         "overhead", "(info)"],
    ]  # fmt: skip


def test_a_target_with_a_floor_of_its_own_is_measured_against_it(tmp_path: Path) -> None:
    """The old llamad fronts llama-servers of its own: its latency and rounds hold them."""
    names = ["direct", "llamad", "direct@0ld0ld0", "llamad@0ld0ld0"]
    with counting_servers(names) as (ports, seen):
        t = {n: Target(n, {"m": f"http://127.0.0.1:{p}"}) for n, p in ports.items()}
        t["llamad@0ld0ld0"] = Target("llamad@0ld0ld0", t["llamad@0ld0ld0"].bases,
                                     floor=t["direct@0ld0ld0"])  # fmt: skip
        ctx = _ctx(tmp_path, tmp_path / "m.gguf", tmp_path / "llama-server")
        rows = peer_rows.latency(ctx, t["direct"], [t["llamad"], t["llamad@0ld0ld0"]], "m")
    per_group = ctx.reps(400, 100) + peer_rows.WARMUP
    assert {n: seen.count(p) for n, p in ports.items()} == dict.fromkeys(names, per_group)
    # No nginx here: llamad's own rows are from these rounds too.
    assert {r.name for r in rows} == {
        f"peers: {n} added latency p{q}" for n in ("llamad", "llamad@0ld0ld0") for q in (50, 99)
    }

    def run(target: Target, model: str, clients: int, n: int) -> dict[str, object]:
        return {"ok": n, "tokens": n, "wall_s": 1.0, "ttft_ms": [1.0, 2.0], "errors": {}}

    full = dataclasses.replace(ctx, quick=False)
    walls, _ = concurrency.rounds(full, list(t.values()), "m", 128, 4, run)
    # At a judged level the old build and its floor get the rounds llamad and direct get.
    assert {n: len(w) for n, w in walls.items()} == dict.fromkeys(names, concurrency.JUDGED_ROUNDS)
    assert t["llamad@0ld0ld0"].against(t["direct"]) is t["direct@0ld0ld0"]
    assert t["llamad"].against(t["direct"]) is t["direct"]
    assert CURRENT.cwd(tmp_path) is None
