"""The returning conversation's rows and their targets (issue #38):

- after an eviction or an idle stop: time to first token <= 1.5x the warm turn's, and
  >= 10x faster than with no cache;
- after an upgrade, a daemon restart (SIGTERM, start again) or a `kill -9` of the
  instance: the turn evaluates no more tokens than it added to the conversation;
- Claude-Code-shaped turns (the billing block's `cch` changed): the same;
- saving adds <= 50 ms per 100 MB saved to an idle stop's wall time: the stop's whole save
  step, over the slot it leaves on disk (saved at the stop, or before it in the
  background and unchanged since, when the stop only asks llama-server for its slots).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench.common import Result
from bench.realmodel_client import Turn

MB100 = 100 * 1000**2
TTFT_TIMES_WARM = 1.5
TIMES_FASTER_THAN_NONE = 10.0
SAVE_MS_PER_100MB = 50.0
BY_TIME = ("evicted", "idle-stopped")  # judged on time; the others on tokens evaluated


@dataclass(frozen=True)
class Stop:
    """An idle stop's save: the step's ms, the bytes it wrote, the bytes of the slot left on
    disk, and the whole stop's ms (its save, then `stopping` to `idle`)."""

    ms: float
    written: int
    kept: int
    whole_ms: float


@dataclass
class Measured:
    """What one size's run saw; a turn is (its answer, the tokens it added). Each event
    comes right after a warm turn of its own: the pair's ratio weighs a busy spell of the
    machine on both sides."""

    first: int = 0  # prompt tokens of the conversation's first turn
    warm: dict[str, list[tuple[Turn, int]]] = field(default_factory=dict)
    after: dict[str, list[tuple[Turn, int]]] = field(default_factory=dict)
    load: dict[str, list[float]] = field(default_factory=dict)  # seconds until it ran again
    nocache: tuple[Turn, int] | None = None
    claude: tuple[int, int] | None = None  # (evaluated, added) of the second turn
    saves: list[Stop] = field(default_factory=list)
    # the background saves: (ms, llama-server's own ms, bytes)
    background: list[tuple[float, float | None, int]] = field(default_factory=list)
    kill_wait: list[float] = field(default_factory=list)  # s from the turn to its save


def _ms(turns: list[tuple[Turn, int]]) -> list[float]:
    return [t.seconds * 1000 for t, _ in turns]


def rows(size: int, m: Measured) -> list[Result]:
    """Every row of one size."""
    assert m.nocache is not None
    warm = [pair for what in m.warm for pair in m.warm[what]]
    none_ms = m.nocache[0].seconds * 1000
    tokens = m.nocache[0].prompt
    head = f"returning {size}:"
    span = f"the conversation grew from {m.first} to {tokens} tokens"
    out = [
        Result(f"{head} warm turn", tokens, "ms", _ms(warm), [none_ms], "ratio", "none", None,
               "-", f"evaluated {statistics.median(t.evaluated for t, _ in warm):.0f} (median); "
               f"floor: the same turn, no cache; {span}"),
        Result(f"{head} no cache", tokens, "ms", [none_ms], _ms(warm), "ratio", "none", None, "-",
               f"cache_prompt false: evaluated {m.nocache[0].evaluated}; floor: warm turns"),
    ]  # fmt: skip
    for what, after in m.after.items():
        ms, evaluated = _ms(after), [float(t.evaluated) for t, _ in after]
        added = [float(a) for _, a in after]
        faster = none_ms / statistics.median(ms)
        note = (
            f"evaluated {[int(e) for e in evaluated]} (added {[int(a) for a in added]}); "
            f"llama-server's own {[round(t.server_ms) for t, _ in after]} ms; "
            f"{faster:.1f}x faster than no cache; back in "
            f"{statistics.median(m.load[what]):.1f} s (load + restore, median)"
        )
        if what == "kill -9" and m.kill_wait:
            note += f"; killed {[round(w, 1) for w in m.kill_wait]} s after the turn before"
            note += " (once its background save was logged)"
        if what in BY_TIME:
            row = Result(
                f"{head} after {what}", tokens, "ms", ms, _ms(m.warm[what]), "ratio", "ratio",
                TTFT_TIMES_WARM, "<= 1.5x warm, >= 10x no cache", note, paired=True,
                also_ok=faster >= TIMES_FASTER_THAN_NONE,
            )  # fmt: skip
        else:
            row = Result(
                f"{head} after {what}", tokens, "tok", evaluated, added, "ratio", "ratio", 1.0,
                "evaluated <= added", f"TTFT {[round(x) for x in ms]} ms; {note}", paired=True,
                also_ok=all(e <= a for e, a in zip(evaluated, added, strict=True)),
            )  # fmt: skip
        row.extra.update(ttft_ms=[round(x, 1) for x in ms], evaluated=evaluated, added=added,
                         back_s=[round(x, 2) for x in m.load[what]])  # fmt: skip
        out.append(row)
    if m.claude is not None:
        cc_evaluated, cc_added = m.claude
        out.append(Result(
            f"{head} Claude Code 2nd turn", tokens, "tok", [float(cc_evaluated)], [float(cc_added)],
            "ratio", "ratio", 1.0, "evaluated <= added",
            "Anthropic /v1/messages, billing block's cch changed; /v1/activity",
        ))  # fmt: skip
    out += _save_row(head, tokens, m)
    return out


def _save_row(head: str, tokens: int, m: Measured) -> list[Result]:
    if not m.saves:
        return []
    per = [s.ms / (s.kept / MB100) if s.kept else s.ms for s in m.saves]
    stops = [s.whole_ms for s in m.saves]
    back = m.background
    row = Result(
        f"{head} save at idle stop", tokens, "ms/100MB", per, stops, "overhead",
        "median", SAVE_MS_PER_100MB, "<= 50 ms per 100 MB",
        f"the stops' save steps {[round(s.ms, 1) for s in m.saves]} ms, writing "
        f"{[round(s.written / 1e6, 1) for s in m.saves]} MB, for "
        f"{[round(s.kept / 1e6, 1) for s in m.saves]} MB kept; the whole idle stops "
        f"(floor column) {[round(s) for s in stops]} ms; background saves "
        f"{[round(ms) for ms, _, _ in back]} ms (llama-server's own "
        f"{[None if own is None else round(own) for _, own, _ in back]}) for "
        f"{min((b for _, _, b in back), default=0) / 1e6:.1f} to "
        f"{max((b for _, _, b in back), default=0) / 1e6:.1f} MB",
    )  # fmt: skip
    row.extra.update(saves=[{"ms": s.ms, "written": s.written, "kept": s.kept,
                             "stop_ms": round(s.whole_ms, 1)} for s in m.saves],
                     background=[{"ms": ms, "server_ms": own, "bytes": b}
                                 for ms, own, b in back])  # fmt: skip
    return [row]
