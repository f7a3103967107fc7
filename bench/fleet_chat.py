"""TTFT and `timings.cache_n` per turn of long conversations, with prompt affinity and
without: five conversations, interleaved turn by turn (as users share a fleet), each
with its own long system prompt, through a front gateway over two replicas of 3 slots.

Five is more than one replica's slots and fewer than both's: with affinity each keeps
its slot, as a household's few chats would; without, they take turns on each replica
and push one another's prefixes out. The model is mid-sized (`SHAPE`): the paced one
reads a long prompt at about 150 tokens/s on one busy core, which would make the run
take half an hour for the misses alone.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import httpx

from bench.common import Context, Result
from llamad.daemon.tinymodel import Shape

SHAPE = Shape(n_embd=256, n_head=4, n_layer=4, n_ff=1024, f16=True)
SLOTS, CTX = 3, 4096  # slots per replica; tokens per slot (the byte-level vocabulary)
SYSTEM = "You are a careful assistant. Keep to the facts you are given, and say so. " * 20
TURNS, CONVERSATIONS, TOKENS = 20, 5, 12
EARLY, LATE = slice(1, 6), slice(-5, None)  # turns 2-6 (turn 1 is cold anyway), last 5
# With affinity, a late turn's TTFT against the first turn's, which reads its (shorter)
# history cold: attention over a longer context still costs more per new token.
COLD = 0.5


def rows(ctx: Context, front: str) -> list[Result]:
    """Per-turn rows for both modes, on fresh system prompts for each."""
    turns = ctx.reps(TURNS, 8)
    seen = {mode: _conversations(front, mode, turns) for mode in ("affinity", "balance")}
    first = seen["affinity"][0]
    late = statistics.median(first[LATE])
    out = [
        Result(
            "fleet: affinity TTFT, last 5 turns against the cold first", turns, "ms", [late],
            [first[0]], "ratio", "ratio", COLD, f"<= {COLD}x (no history re-read)",
            "the first turn reads the system prompt cold; a late turn's history is twice "
            "as long, so re-reading it would cost about twice the first",
        ),
        _against(seen),
    ]  # fmt: skip
    for mode, (ttft, cached) in seen.items():
        early = statistics.median(ttft[EARLY])
        out.append(
            Result(
                f"fleet: {mode} TTFT, last 5 turns against turns 2-6", turns, "ms",
                [statistics.median(ttft[LATE])], [early], "ratio", "none", None, "-",
                f"median of {CONVERSATIONS} conversations per turn; TTFT ms by turn "
                f"{[round(t) for t in ttft]}; cache_n by turn {cached}",
                extra={"ttft_ms": ttft, "cache_n": cached, "mode": mode},
            )
        )  # fmt: skip
    return out


def _against(seen: dict[str, tuple[list[float], list[int]]]) -> Result:
    """Turns 2 on, with affinity against without: what a turn on a colder host costs."""
    mine, theirs = seen["affinity"][0][1:], seen["balance"][0][1:]
    return Result(
        "fleet: TTFT of turns 2 on, affinity against balance", len(mine), "ms",
        [statistics.mean(mine)], [statistics.mean(theirs)], "ratio", "none", None, "-",
        f"mean TTFT per turn; worst turn {max(mine):.0f} ms with affinity, "
        f"{max(theirs):.0f} ms without",
    )  # fmt: skip


def _conversations(front: str, mode: str, turns: int) -> tuple[list[float], list[int]]:
    """Median TTFT (ms) and cache_n per turn over the interleaved conversations."""
    headers = {"x-llamad-affinity": "off"} if mode == "balance" else {}
    talks = [[{"role": "system", "content": f"{mode} {i}. {SYSTEM}"}] for i in range(CONVERSATIONS)]
    ttft: list[list[float]] = [[] for _ in range(turns)]
    cached: list[list[int]] = [[] for _ in range(turns)]
    with httpx.Client(timeout=300) as client:
        for turn in range(turns):
            for i, messages in enumerate(talks):
                messages.append({"role": "user", "content": f"Question {turn} of talk {i}?"})
                took, text, timings = _stream(client, front, messages, headers)
                messages.append({"role": "assistant", "content": text})
                ttft[turn].append(took)
                cached[turn].append(int(timings.get("cache_n", 0)))
    return [statistics.median(t) for t in ttft], [int(statistics.median(c)) for c in cached]


def _stream(
    client: httpx.Client, front: str, messages: list[dict[str, str]], headers: dict[str, str]
) -> tuple[float, str, dict[str, Any]]:
    """One streamed turn: ms to its first content, its text, and its timings."""
    body = {"model": "chat", "messages": messages, "max_tokens": TOKENS, "stream": True}
    start, first, text = time.perf_counter(), 0.0, ""
    timings: dict[str, Any] = {}
    with client.stream("POST", f"{front}/v1/chat/completions", json=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"chat turn: HTTP {r.status_code}: {r.read()[:200]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            timings = event.get("timings") or timings
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece and not first:
                    first = time.perf_counter()
                text += piece
    return (first - start) * 1000 if first else float("nan"), text, timings
