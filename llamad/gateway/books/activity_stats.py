"""What `llamactl top` and the page summarise: per-model rates over the last minute, and
usage per key name since the daemon started."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llamad.gateway.books.activity import Activity, Record

WINDOW_S = 60.0


@dataclass
class KeyUsage:
    """One key name's requests and tokens since the daemon started."""

    requests: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class KeyTotals:
    """A listener of `Activity` that adds up usage per key name (the ring forgets)."""

    def __init__(self) -> None:
        self.keys: dict[str, KeyUsage] = {}

    def __call__(self, r: Record) -> None:
        usage = self.keys.setdefault(r.key or "-", KeyUsage())
        usage.requests += 1
        usage.errors += r.status >= 400
        usage.prompt_tokens += r.prompt_tokens or 0
        usage.completion_tokens += r.completion_tokens or 0

    def to_dict(self) -> dict[str, dict[str, int]]:
        """By key name ("-" for requests without a named key)."""
        return {name: vars(u).copy() for name, u in sorted(self.keys.items())}


def model_rates(activity: Activity, now: float | None = None) -> dict[str, dict[str, Any]]:
    """Per instance, over the last minute: requests per minute, the median tokens per
    second, the median TTFT, and the share of prompt tokens taken from the cache."""
    recent = activity.since((now or time.time()) - WINDOW_S)
    by_model: dict[str, list[Record]] = {}
    for r in recent:
        by_model.setdefault(r.instance or r.model, []).append(r)
    return {name: _rates(records) for name, records in by_model.items()}


def _rates(records: list[Record]) -> dict[str, Any]:
    speeds = [r.tokens_per_s for r in records if r.tokens_per_s is not None and r.completion_tokens]
    ttfts = [r.ttft_s for r in records if r.ttft_s is not None and r.status < 400]
    return {
        "requests_per_min": len(records),
        "tokens_per_s": _median(speeds),
        "ttft_p50_s": _median(ttfts),
        "cache_hit_ratio": _hit_ratio(records),
    }


def _hit_ratio(records: list[Record]) -> float | None:
    """Prompt tokens from the cache over all prompt tokens counted (None: none counted)."""
    cached = sum(r.prompt_cached or 0 for r in records if r.prompt_evaluated is not None)
    evaluated = sum(r.prompt_evaluated or 0 for r in records)
    return round(cached / (cached + evaluated), 4) if cached + evaluated else None


def _median(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(statistics.median(values), 4) if values else None
