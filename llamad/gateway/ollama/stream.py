"""Reading llama-server's streamed events into pieces of an Ollama answer.

Two dialects come back: OpenAI chat chunks (from /v1/chat/completions) and llama.cpp's own
completion events (from /completion and /infill), streamed or as one document (which reads
like a single last chunk). Both are reduced to `Piece`s (text,
thinking, tool calls) plus the finish reason, timings and usage of the last event; the
routes render pieces in /api/chat's or /api/generate's shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

# llama-server's finish reasons and stop types in Ollama's words; tool calls end with "stop".
_REASONS = {"length": "length", "limit": "length", "tool_calls": "stop"}


@dataclass
class Piece:
    """Some of the answer: text, thinking and (complete) tool calls."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)  # in Ollama's shape

    def __bool__(self) -> bool:
        return bool(self.content or self.thinking or self.tool_calls or self.logprobs)

    def extend(self, other: Piece) -> None:
        """Append another piece (used to build one answer for `stream: false`)."""
        self.content += other.content
        self.thinking += other.thinking
        self.tool_calls += other.tool_calls
        self.logprobs += other.logprobs


class Events(Protocol):
    """A reader of one upstream dialect."""

    reason: str
    timings: dict[str, Any] | None
    usage: dict[str, Any] | None

    def feed(self, event: dict[str, Any]) -> Piece: ...
    def finish(self) -> Piece: ...


def stream_error(event: dict[str, Any]) -> str | None:
    """The message of an error event sent mid-stream, if this is one."""
    err = event.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return str(err.get("message", err))
    return str(err)


def _token(entry: dict[str, Any]) -> dict[str, Any]:
    out = {"token": str(entry.get("token", "")), "logprob": float(entry.get("logprob", 0.0))}
    if isinstance(entry.get("bytes"), list):
        out["bytes"] = entry["bytes"]
    return out


def ollama_logprobs(choice_logprobs: object) -> list[dict[str, Any]]:
    """OpenAI's `choices[].logprobs.content` as Ollama's `logprobs` list."""
    content = choice_logprobs.get("content") if isinstance(choice_logprobs, dict) else None
    out = []
    for entry in content if isinstance(content, list) else []:
        if not isinstance(entry, dict):
            continue
        item = _token(entry)
        top = entry.get("top_logprobs")
        if isinstance(top, list) and top:
            item["top_logprobs"] = [_token(t) for t in top if isinstance(t, dict)]
        out.append(item)
    return out


class ChatEvents:
    """OpenAI chat chunks. Tool calls arrive in fragments and leave whole at the end."""

    def __init__(self) -> None:
        self.reason = "stop"
        self.timings: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self._calls: dict[int, dict[str, str]] = {}

    def feed(self, event: dict[str, Any]) -> Piece:
        """The piece in one chunk (empty for role-only and bookkeeping chunks)."""
        self.timings = event.get("timings") or self.timings
        self.usage = event.get("usage") or self.usage
        piece = Piece()
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            piece.content += delta.get("content") or ""
            piece.thinking += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                self._add_call(call)
            piece.logprobs += ollama_logprobs(choice.get("logprobs"))
            if choice.get("finish_reason"):
                self.reason = _REASONS.get(choice["finish_reason"], "stop")
        return piece

    def _add_call(self, call: dict[str, Any]) -> None:
        slot = self._calls.setdefault(int(call.get("index", len(self._calls))), {})
        fn = call.get("function") or {}
        slot["name"] = slot.get("name", "") + (fn.get("name") or "")
        slot["arguments"] = slot.get("arguments", "") + (fn.get("arguments") or "")

    def finish(self) -> Piece:
        """The tool calls gathered over the stream, in Ollama's shape."""
        calls = []
        for index in sorted(self._calls):
            slot = self._calls[index]
            try:
                args = json.loads(slot.get("arguments") or "{}")
            except ValueError:
                args = {"arguments": slot.get("arguments", "")}
            calls.append({"function": {"index": index, "name": slot["name"], "arguments": args}})
        return Piece(tool_calls=calls)


class CompletionEvents:
    """llama.cpp's /completion and /infill events: `content`, and on the last, `stop`."""

    def __init__(self) -> None:
        self.reason = "stop"
        self.timings: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> Piece:
        """The text of one event; the last one also brings the timings."""
        if event.get("stop"):
            self.timings = event.get("timings") or self.timings
            self.reason = _REASONS.get(str(event.get("stop_type")), "stop")
            evaluated = event.get("tokens_evaluated")
            if isinstance(evaluated, int):
                self.usage = {"prompt_tokens": evaluated}
        return Piece(content=str(event.get("content") or ""))

    def finish(self) -> Piece:
        """Nothing is held back in this dialect."""
        return Piece()
