"""Ollama's durations: `keep_alive` in, nanoseconds and RFC 3339 times out."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from llamad.gateway.ollama.errors import OllamaError

# Go's time.ParseDuration units, which Ollama's keep_alive strings use ("5m", "1h30m").
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# What /api/ps shows as the expiry of a model that never unloads (Ollama shows a far date too).
NEVER = 253402300799.0  # 9999-12-31T23:59:59Z
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_keep_alive(value: object) -> float | None:
    """Seconds from a keep_alive value: a number of seconds or a Go duration string.

    None means "not given". Negative means never unload (always -1.0); 0 means unload now.
    Raises OllamaError (400) for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise OllamaError(400, f"keep_alive must be a duration or seconds, not {value}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_go_duration(value.strip())
    else:
        raise OllamaError(400, f"keep_alive must be a duration or seconds, not {value!r}")
    if math.isnan(seconds):
        raise OllamaError(400, "keep_alive must be a number")
    if math.isinf(seconds) and seconds > 0:
        raise OllamaError(400, "keep_alive must be finite (a negative value keeps the model)")
    return -1.0 if seconds < 0 else seconds


def _parse_go_duration(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    try:
        return sign * float(body)  # a bare number: seconds, as Ollama's JSON number means
    except ValueError:
        pass
    total, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(body) or not body:
        raise OllamaError(400, f"keep_alive: invalid duration {text!r}")
    return sign * total


def nanoseconds(seconds: float) -> int:
    """Seconds as Ollama's integer nanoseconds."""
    return max(0, round(seconds * 1e9))


def rfc3339(epoch: float) -> str:
    """An epoch time as Ollama prints times: RFC 3339 in UTC with fractional seconds."""
    dt = datetime.fromtimestamp(min(epoch, NEVER), tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def done_fields(
    *,
    reason: str,
    timings: dict[str, Any] | None,
    usage: dict[str, Any] | None,
    total_seconds: float,
    load_seconds: float,
) -> dict[str, Any]:
    """The fields of the last chunk, from llama-server's `timings` (milliseconds) and `usage`.

    Ollama counts the whole prompt in prompt_eval_count; llama-server's prompt_n leaves out
    the tokens it reused from its cache, so the usage count wins when there is one.
    """
    t = timings or {}
    prompt_n = int(t.get("prompt_n", 0)) + int(t.get("cache_n", 0))
    prompt_count = int((usage or {}).get("prompt_tokens", prompt_n))
    return {
        "done_reason": reason,
        "total_duration": nanoseconds(total_seconds),
        "load_duration": nanoseconds(load_seconds),
        "prompt_eval_count": prompt_count,
        "prompt_eval_duration": nanoseconds(float(t.get("prompt_ms", 0.0)) / 1000),
        "eval_count": int(t.get("predicted_n", (usage or {}).get("completion_tokens", 0))),
        "eval_duration": nanoseconds(float(t.get("predicted_ms", 0.0)) / 1000),
    }
