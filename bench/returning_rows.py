"""The returning conversation's rows and their targets (issue #38):

- after an eviction or an idle stop: time to first token <= 1.5x the warm turn's, and
  >= 10x faster than with no cache;
- after an upgrade, a daemon restart (SIGTERM, start again) or a `kill -9` of the
  instance: the turn evaluates no more tokens than it added to the conversation;
- Claude-Code-shaped turns (the billing block's `cch` changed): the same;
- saving adds <= 50 ms per 100 MB saved to an idle stop's wall time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.common import Result
from bench.realmodel_client import Turn

MB100 = 100 * 1000**2
TTFT_TIMES_WARM = 1.5
TIMES_FASTER_THAN_NONE = 10.0
SAVE_MS_PER_100MB = 50.0
BY_TIME = ("evicted", "idle-stopped")
BY_TOKENS = ("upgraded", "daemon restarted", "kill -9")


@dataclass
class Measured:
    """What one size's run saw; a turn is (its answer, the tokens it added)."""

    warm: list[tuple[Turn, int]] = field(default_factory=list)
    after: dict[str, tuple[Turn, int]] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)  # seconds until it ran again
    nocache: tuple[Turn, int] | None = None
    claude: tuple[int, int] | None = None  # (evaluated, added) of the second turn
    stop_ms: float = 0.0  # the idle stop's wall time, stopping -> idle
    saves: list[dict[str, Any]] = field(default_factory=list)  # its cache.saved events


def rows(size: int, m: Measured) -> list[Result]:
    """Every row of one size."""
    assert m.nocache is not None
    warm = [t.seconds * 1000 for t, _ in m.warm]
    none_ms = m.nocache[0].seconds * 1000
    tokens = m.nocache[0].prompt
    head = f"returning {size}:"
    out = [
        Result(f"{head} warm turn", tokens, "ms", warm, [none_ms], "ratio", "none", None, "-",
               f"evaluated {[t.evaluated for t, _ in m.warm]}, llama-server's own "
               f"{[round(t.server_ms) for t, _ in m.warm]} ms; floor: the same turn, no cache"),
        Result(f"{head} no cache", tokens, "ms", [none_ms], warm, "ratio", "none", None, "-",
               f"cache_prompt false: evaluated {m.nocache[0].evaluated}; floor: warm turn"),
    ]  # fmt: skip
    for what in (*BY_TIME, *BY_TOKENS):
        turn, added = m.after[what]
        ms = turn.seconds * 1000
        faster = none_ms / ms
        note = (
            f"evaluated {turn.evaluated} (added {added}), llama-server's own "
            f"{turn.server_ms:.0f} ms; {faster:.1f}x faster than no cache; "
            f"back in {m.load[what]:.1f} s (load + restore)"
        )
        if what in BY_TIME:
            row = Result(
                f"{head} after {what}", tokens, "ms", [ms], warm, "ratio", "ratio",
                TTFT_TIMES_WARM, "<= 1.5x warm, >= 10x no cache", note,
                also_ok=faster >= TIMES_FASTER_THAN_NONE,
            )  # fmt: skip
        else:
            row = Result(
                f"{head} after {what}", tokens, "tok", [float(turn.evaluated)], [float(added)],
                "ratio", "ratio", 1.0, "evaluated <= added", f"{ms:.0f} ms; {note}",
            )  # fmt: skip
        row.extra.update(ttft_ms=round(ms, 1), evaluated=turn.evaluated, added=added,
                         back_s=round(m.load[what], 2))  # fmt: skip
        out.append(row)
    if m.claude is not None:
        evaluated, added = m.claude
        out.append(Result(
            f"{head} Claude Code 2nd turn", tokens, "tok", [float(evaluated)], [float(added)],
            "ratio", "ratio", 1.0, "evaluated <= added",
            "Anthropic /v1/messages, billing block's cch changed; /v1/activity",
        ))  # fmt: skip
    out += _save_row(head, tokens, m)
    return out


def _save_row(head: str, tokens: int, m: Measured) -> list[Result]:
    if not m.saves:
        return []
    ms = sum(float(e["ms"]) for e in m.saves)
    size = sum(int(e["bytes"]) for e in m.saves)
    per = ms / (size / MB100) if size else ms
    row = Result(
        f"{head} save at idle stop", tokens, "ms/100MB", [per], [m.stop_ms], "overhead",
        "median", SAVE_MS_PER_100MB, "<= 50 ms per 100 MB",
        f"save {ms:.0f} ms for {size / 1e6:.1f} MB; the whole idle stop {m.stop_ms:.0f} ms "
        "(floor column)",
    )  # fmt: skip
    row.extra.update(save_ms=round(ms, 1), save_bytes=size, stop_ms=round(m.stop_ms, 1))
    return [row]
