"""Throughput under concurrency, and memory under a long run, through every target.

The clients run in a process of their own (`bench/load_client.py`), so their CPU is not
the proxy's. Throughput: one instance of the paced model with 4 slots, 1, 8, 32 and 128
concurrent streaming clients sending a fixed number of requests; at each level every
target takes its turn, in ROUNDS rounds (more at the judged levels for direct, llamad and
nginx), each in another order. Memory: the proxy's RSS after 1,000 relayed 1-token
completions and after the whole soak (8 clients).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Context, Result
from bench.targets import Target

LEVELS = (1, 8, 32, 128)
TOKENS = 16
# Each level's runs, every target in each, the order turned each round: one run of a
# few seconds swings by several per cent either way.
ROUNDS = 3
JUDGED = (32, 128)  # llamad's throughput ratio against direct: the judged levels
# At the judged levels, the targets judged against each other get more rounds: llamad
# must be at least direct's 0.97x and never below nginx, a gap the size of that swing.
JUDGED_ROUNDS = 5
COMPARED = ("direct", "llamad", "nginx")
SOAK_CLIENTS = 8
SOAK_FIRST = 1000
SOAK_BUDGET_S = (60, 15)  # the longest a proxy's soak runs by default: full, --quick


def requests_at(ctx: Context, clients: int) -> int:
    """The fixed request count at a level: enough for every client to send several."""
    return ctx.reps(max(24, min(2 * clients, 128)), max(8, clients))


def load(target: Target, model: str, clients: int, requests: int, stream: bool = True,
         tokens: int = TOKENS, seconds: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the load client against `target` and return what it saw."""
    spec = {"url": target.bases[model], "model": model, "clients": clients,
            "requests": requests, "tokens": tokens, "stream": stream,
            "seconds": seconds}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "bench.load_client", json.dumps(spec)],
        # A safety net: any proxy serves more than 20 requests a second.
        capture_output=True, text=True, timeout=900 + requests / 20, cwd=Path(__file__).parents[1],
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"load client failed: {done.stderr[-2000:]}")
    got: dict[str, Any] = json.loads(done.stdout)
    return got


def _p(values: list[float], q: int) -> float:
    ok = sorted(v for v in values if not math.isnan(v))
    if len(ok) < 2:
        return ok[0] if ok else float("nan")
    return statistics.quantiles(ok, n=100, method="inclusive")[q - 1]


def summary(got: dict[str, Any]) -> dict[str, Any]:
    """Requests and tokens per second, TTFT p50 and p99, errors."""
    wall = got["wall_s"]
    return {
        "req_per_s": round(got["ok"] / wall, 2), "tok_per_s": round(got["tokens"] / wall, 1),
        "ttft_p50_ms": round(_p(got["ttft_ms"], 50), 1),
        "ttft_p99_ms": round(_p(got["ttft_ms"], 99), 1),
        "errors": sum(got["errors"].values()), "error_kinds": got["errors"], "wall_s": wall,
    }  # fmt: skip


def rounds(ctx: Context, targets: list[Target], model: str, clients: int, n: int,
           run: Callable[[Target, str, int, int], dict[str, Any]] = load,
           ) -> tuple[dict[str, list[float]], dict[str, dict[str, Any]]]:  # fmt: skip
    """Every target's walls over ROUNDS rounds (JUDGED_ROUNDS for those COMPARED at the
    JUDGED levels), each round in another order (a run just after another's warms or
    tires the server for it), and its median round's figures."""
    walls: dict[str, list[float]] = {t.name: [] for t in targets}
    seen: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
    rounds = JUDGED_ROUNDS if clients in JUDGED else ROUNDS
    for r in range(ctx.reps(rounds, 1)):
        turned = targets[r % len(targets) :] + targets[: r % len(targets)]
        for t in turned if r < ROUNDS else [t for t in turned if t.kind in COMPARED]:
            s = summary(run(t, model, clients, n))
            walls[t.name].append(s["wall_s"])
            seen[t.name].append(s)
    middle = {k: sorted(v, key=lambda s: s["wall_s"])[len(v) // 2] for k, v in seen.items()}
    return walls, middle


def throughput(ctx: Context, direct: Target, peers: list[Target], model: str) -> list[Result]:
    """One row per peer and level: wall time for the fixed requests against direct's (or
    the peer's own floor's), the medians of ROUNDS interleaved rounds."""
    rows: list[Result] = []
    floors = [f for t in peers for f in t.own_floors()]
    for clients in LEVELS:
        n = requests_at(ctx, clients)
        walls, seen = rounds(ctx, [direct, *floors, *peers], model, clients, n)
        for t in peers:
            floor = t.against(direct).name
            s, base = seen[t.name], seen[floor]
            judged = t.name == "llamad" and clients in JUDGED
            nginx = seen.get("nginx")
            rows.append(
                Result(
                    f"concurrency {clients} clients: {t.name}", n, "s", walls[t.name],
                    walls[floor], "ratio", "ratio" if judged else "none", 1 / 0.97,
                    ">= 0.97x, >= nginx, 0 errors" if judged else "-",
                    f"{s['req_per_s']} req/s, {s['tok_per_s']} tok/s, TTFT p50 "
                    f"{s['ttft_p50_ms']} ms p99 {s['ttft_p99_ms']} ms, {s['errors']} errors; "
                    f"direct {base['tok_per_s']} tok/s, TTFT p99 {base['ttft_p99_ms']} ms",
                    also_ok=not judged or (s["errors"] == 0 and (nginx is None or
                                                    s["tok_per_s"] >= nginx["tok_per_s"])),
                    extra={"clients": clients, "tokens": TOKENS, "target": t.name,
                           "figures": s, "direct": base},
                )
            )  # fmt: skip
            if t.name == "llamad":
                rows.append(
                    Result(
                        f"concurrency {clients} clients: llamad TTFT p99", n, "ms",
                        [s["ttft_p99_ms"]], [base["ttft_p99_ms"]], "overhead", "none", None, "-",
                        "time to first token; floor: direct, same level",
                    )
                )  # fmt: skip
    return rows


def soak(ctx: Context, peers: list[Target], model: str) -> list[Result]:
    """Each proxy's RSS after SOAK_FIRST relayed requests and after the whole soak: 100,000
    requests (2,000 with --quick). llamad, whose row is judged, gets them all in a full
    run; a peer stops at SOAK_BUDGET_S (LiteLLM serves some 20 a second: 100,000 would
    take over an hour). The count is in the row's name; `--soak-requests N` sends N to
    every proxy, however long that takes."""
    total = ctx.soak or ctx.reps(100_000, 2_000)
    rows = []
    for t in peers:
        whole = ctx.soak or (t.kind == "llamad" and not ctx.quick)
        budget = None if whole else ctx.reps(*SOAK_BUDGET_S)
        first = load(t, model, SOAK_CLIENTS, SOAK_FIRST, stream=False, tokens=1)
        early = t.rss_mb(model)
        rest = load(t, model, SOAK_CLIENTS, total - SOAK_FIRST, False, 1, budget)
        late = t.rss_mb(model)
        sent = SOAK_FIRST + rest["ok"] + sum(rest["errors"].values())
        failed = sum(first["errors"].values()) + sum(rest["errors"].values())
        rate = (first["ok"] + rest["ok"]) / (first["wall_s"] + rest["wall_s"])
        judged = t.name == "llamad"
        rows.append(
            Result(
                f"soak: {t.name} RSS after {sent} requests", sent, "MB", [late], [early],
                "ratio", "ratio" if judged else "none", 1.10,
                "<= 1.10x RSS at 1,000" if judged else "-",
                f"floor: RSS after {SOAK_FIRST}; {SOAK_CLIENTS} clients, 1-token completions, "
                f"{rate:.0f} req/s, {failed} failed", also_ok=failed == 0,
            )
        )  # fmt: skip
    return rows
