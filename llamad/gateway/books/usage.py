"""Token counts and speed read from what llama-server returns: `usage` and `timings`.

A prompt's tokens are split in two: those taken from the prompt cache (`timings.cache_n`,
OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`)
and those evaluated (`timings.prompt_n`), which is what a cache hit ratio is made of.

The relay never parses what it passes on: it keeps its last two chunks, and once the
answer has ended their JSON objects named `usage` and `timings` are read from there. A
stream's last event carries both (`usage` with `stream_options.include_usage`), and a
whole answer ends with them, so the end of the body is enough.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

_DECODER = json.JSONDecoder()
# Enough for llama-server's last event (or a whole answer's `usage` and `timings`, which
# end it), little enough that a long answer is not copied to find them.
TAIL_BYTES = 8192
# Enough for an Anthropic stream's first event, which says the prompt's counts.
HEAD_BYTES = 2048


@dataclass(frozen=True)
class Usage:
    """Tokens in and out, and generation speed, when llama-server said."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_per_s: float | None = None
    prompt_ms: float | None = None  # time llama-server spent on the prompt
    cached_tokens: int | None = None  # prompt tokens taken from the prompt cache
    evaluated_tokens: int | None = None  # prompt tokens evaluated


NONE = Usage()


def from_fields(timings: Mapping[str, Any] | None, usage: Mapping[str, Any] | None) -> Usage:
    """A Usage from llama-server's `timings` and the `usage` object (OpenAI's or
    Anthropic's; either may be missing): `usage` counts first, then the timings'."""
    t, u = timings or {}, usage or {}
    cached, evaluated = _split(t, u)
    prompt = _int(u.get("prompt_tokens"))
    if prompt is None and evaluated is not None:
        prompt = evaluated + (cached or 0)
    completion = _int(u.get("completion_tokens"))
    if completion is None:
        completion = _int(u.get("output_tokens"))
    if completion is None:
        completion = _int(t.get("predicted_n"))
    speed, prompt_ms = _float(t.get("predicted_per_second")), _float(t.get("prompt_ms"))
    return Usage(prompt, completion, speed, prompt_ms, cached, evaluated)


def _split(t: Mapping[str, Any], u: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The prompt's (cached, evaluated) tokens: the timings' own counts when there are
    timings, else what OpenAI's or Anthropic's usage says."""
    if _int(t.get("prompt_n")) is not None:
        return _int(t.get("cache_n")), _int(t.get("prompt_n"))
    if _int(u.get("input_tokens")) is not None:  # Anthropic's: input is what was evaluated
        return _int(u.get("cache_read_input_tokens")), _int(u.get("input_tokens"))
    details = u.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    prompt = _int(u.get("prompt_tokens"))
    if cached is None or prompt is None:
        return cached, None
    return cached, max(0, prompt - cached)


def from_chunks(prev: bytes, last: bytes, head: bytes = b"") -> Usage:
    """The Usage in an answer's last two chunks, of which only the last TAIL_BYTES count;
    the prompt's counts from its `head` (first bytes) when the end has none: an Anthropic
    stream says them in its first event (`message_start`) and only output_tokens last."""
    if len(last) >= TAIL_BYTES:
        usage = from_tail(last[-TAIL_BYTES:])
    else:
        usage = from_tail(prev[-(TAIL_BYTES - len(last)) :] + last)
    if usage.prompt_tokens is not None or b'"usage"' not in head:
        return usage
    start = from_fields(None, _first_object(head.decode("utf-8", "replace")))
    return replace(
        usage,
        prompt_tokens=start.prompt_tokens,
        cached_tokens=start.cached_tokens,
        evaluated_tokens=start.evaluated_tokens,
    )


def from_tail(tail: bytes) -> Usage:
    """The Usage in the last bytes of an answer (SSE events or one JSON document)."""
    if b'"timings"' not in tail and b'"usage"' not in tail:
        return NONE
    text = tail.decode("utf-8", "replace")
    return from_fields(_last_object(text, '"timings"'), _last_object(text, '"usage"'))


def _first_object(text: str) -> dict[str, Any] | None:
    return _object_at(text, text.find('"usage"'), '"usage"')


def _last_object(text: str, key: str) -> dict[str, Any] | None:
    return _object_at(text, text.rfind(key), key)


def _object_at(text: str, at: int, key: str) -> dict[str, Any] | None:
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
