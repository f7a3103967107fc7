"""A shaped request's token counts, for its activity record: what llama-server said of
each choice (its `usage` and `timings`), summed, as the answer's own usage is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llamad.gateway.books.usage import Usage, from_fields

# Counts that add up over choices; a speed does not (each choice's is its own slot's).
_SUMMED_TIMINGS = ("prompt_n", "cache_n", "predicted_n", "prompt_ms")


def summed(docs: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """`docs` (usage objects) added up: their integers, and those of objects in them
    (`prompt_tokens_details`)."""
    total: dict[str, Any] = {}
    for doc in docs:
        _add(total, doc or {})
    return total


def _add(total: dict[str, Any], doc: Mapping[str, Any]) -> None:
    for key, value in doc.items():
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
        elif isinstance(value, Mapping) and isinstance(total.setdefault(key, {}), dict):
            _add(total[key], value)


def usage_of(ends: Sequence[Mapping[str, Any]]) -> Usage:
    """The Usage of a request from each choice's last word (a whole answer, or a
    stream's last event with `usage` and `timings`): counts summed, the first speed."""
    timings: dict[str, Any] = {}
    for end in ends:
        t = end.get("timings")
        if not isinstance(t, Mapping):
            continue
        for key in _SUMMED_TIMINGS:
            value = t.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                timings[key] = timings.get(key, 0) + value
        timings.setdefault("predicted_per_second", t.get("predicted_per_second"))
    usage = summed(e.get("usage") if isinstance(e.get("usage"), Mapping) else None for e in ends)
    return from_fields(timings or None, usage or None)
