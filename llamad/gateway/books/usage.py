"""Token counts and speed read from what llama-server returns: `usage` and `timings`.

The relay never parses what it passes on: it keeps its last two chunks, and once the
answer has ended their JSON objects named `usage` and `timings` are read from there. A
stream's last event carries both (`usage` with `stream_options.include_usage`), and a
whole answer ends with them, so the end of the body is enough.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
# Enough for llama-server's last event (or a whole answer's `usage` and `timings`, which
# end it), little enough that a long answer is not copied to find them.
TAIL_BYTES = 8192


@dataclass(frozen=True)
class Usage:
    """Tokens in and out, and generation speed, when llama-server said."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_per_s: float | None = None
    prompt_ms: float | None = None  # time llama-server spent on the prompt


NONE = Usage()


def from_fields(timings: Mapping[str, Any] | None, usage: Mapping[str, Any] | None) -> Usage:
    """A Usage from llama-server's `timings` and OpenAI's `usage` objects (either may be
    missing): `usage` counts first, then the timings' (whose prompt count leaves out what
    came from the cache)."""
    t, u = timings or {}, usage or {}
    prompt = _int(u.get("prompt_tokens"))
    if prompt is None and _int(t.get("prompt_n")) is not None:
        prompt = (_int(t.get("prompt_n")) or 0) + (_int(t.get("cache_n")) or 0)
    completion = _int(u.get("completion_tokens"))
    if completion is None:
        completion = _int(t.get("predicted_n"))
    return Usage(
        prompt, completion, _float(t.get("predicted_per_second")), _float(t.get("prompt_ms"))
    )


def from_chunks(prev: bytes, last: bytes) -> Usage:
    """The Usage in an answer's last two chunks, of which only the last TAIL_BYTES count."""
    if len(last) >= TAIL_BYTES:
        return from_tail(last[-TAIL_BYTES:])
    return from_tail(prev[-(TAIL_BYTES - len(last)) :] + last)


def from_tail(tail: bytes) -> Usage:
    """The Usage in the last bytes of an answer (SSE events or one JSON document)."""
    if b'"timings"' not in tail and b'"usage"' not in tail:
        return NONE
    text = tail.decode("utf-8", "replace")
    return from_fields(_last_object(text, '"timings"'), _last_object(text, '"usage"'))


def _last_object(text: str, key: str) -> dict[str, Any] | None:
    at = text.rfind(key)
    if at < 0:
        return None
    start = text.find("{", at + len(key))
    # Only `"key": {` counts: not the key's name inside some string.
    if start < 0 or text[at + len(key) : start].strip() != ":":
        return None
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except ValueError:  # cut by the tail's start, or not JSON
        return None
    return value if isinstance(value, dict) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
