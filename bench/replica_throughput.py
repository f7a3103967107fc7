"""Throughput of two replicas of the paced model against one, at 8 and 32 clients: the
same fixed requests through each, so the wall times compare. The fleet's rows (two
llamads behind a front) and the local ones (one llamad, two instances sharing an alias)
are both this measure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench import concurrency
from bench.common import Context, Result
from bench.targets import Target

LEVELS = (8, 32)


@dataclass(frozen=True)
class Way:
    """How the load client reaches N replicas: a gateway's URL and the model name."""

    url: str
    model: str


def rows(ctx: Context, label: str, one: Way, two: Way, judged: float | None = None) -> list[Result]:
    """Each level twice, in the order 1, 2, 2, 1 replicas, so a spell of load from
    outside the run weighs on both alike; the faster of each pair counts. With `judged`,
    the 32-client row must reach that many times one replica's throughput."""
    out = []
    for clients in LEVELS:
        n = concurrency.requests_at(ctx, clients)
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for replicas in (1, 2, 2, 1):
            way = one if replicas == 1 else two
            target = Target(f"{label}-{replicas}", {way.model: way.url})
            got = concurrency.load(target, way.model, clients, n)
            runs[replicas].append(concurrency.summary(got))
        s1, s2 = (min(runs[r], key=lambda s: s["wall_s"]) for r in (1, 2))
        errors = sum(s["errors"] for r in runs.values() for s in r)
        speedup = s1["wall_s"] / s2["wall_s"]
        judge = judged if clients == 32 else None
        out.append(
            Result(
                f"{label}: 2 replicas against 1, {clients} clients", n, "s", [s2["wall_s"]],
                [s1["wall_s"]], "ratio", "none" if judge is None else "ratio",
                None if judge is None else 1 / judge,
                "-" if judge is None else f">= {judge}x throughput",
                f"{speedup:.2f}x: 2 replicas {s2['tok_per_s']} tok/s, TTFT p50 "
                f"{s2['ttft_p50_ms']} ms; 1 replica {s1['tok_per_s']} tok/s, TTFT p50 "
                f"{s1['ttft_p50_ms']} ms; {errors} errors; walls "
                f"{[s['wall_s'] for s in runs[1]]} and {[s['wall_s'] for s in runs[2]]} s",
                also_ok=errors == 0,
                extra={"clients": clients, "one": runs[1], "two": runs[2],
                       "speedup": round(speedup, 3)},
            )
        )  # fmt: skip
    return out
