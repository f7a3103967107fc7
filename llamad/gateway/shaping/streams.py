"""A whole shaped answer told as its family's stream, for the Responses and Anthropic
routes (chat and text completions stream as they are generated: live.py): the events a
client's stream parser expects, in order, the text or call in one delta."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llamad.gateway.shaping.plan import MESSAGES, RESPONSES, Shape


def _data(doc: Any) -> bytes:
    return b"data: " + json.dumps(doc, ensure_ascii=False).encode() + b"\n\n"


def _event(doc: dict[str, Any]) -> bytes:
    return b"event: " + str(doc["type"]).encode() + b"\n" + _data(doc)


def response(shape: Shape, whole: dict[str, Any]) -> Iterator[bytes]:
    """Responses events: created, each output item added and done (a call's arguments
    or a message's text in one delta), completed."""
    seq = iter(range(1 << 30))
    started = {**whole, "status": "in_progress", "output": []}
    yield _event({"type": "response.created", "sequence_number": next(seq), "response": started})
    for at, item in enumerate(whole.get("output") or []):
        opened = {**item, "status": "in_progress"}
        if item.get("type") == "function_call":
            opened["arguments"] = ""
        where = {"output_index": at, "item_id": item.get("id")}
        yield _event({"type": "response.output_item.added", "sequence_number": next(seq),
                      "output_index": at, "item": opened})  # fmt: skip
        if item.get("type") == "function_call":
            args = item["arguments"]
            yield _event({"type": "response.function_call_arguments.delta",
                          "sequence_number": next(seq), "delta": args, **where})  # fmt: skip
            yield _event({"type": "response.function_call_arguments.done",
                          "sequence_number": next(seq), "arguments": args, **where})  # fmt: skip
        yield _event({"type": "response.output_item.done", "sequence_number": next(seq),
                      "output_index": at, "item": item})  # fmt: skip
    yield _event({"type": "response.completed", "sequence_number": next(seq), "response": whole})


def message(shape: Shape, whole: dict[str, Any]) -> Iterator[bytes]:
    """Anthropic's events: message_start, each block started, its delta, stopped, then
    message_delta with the stop reason and message_stop."""
    usage = whole.get("usage") or {}
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    yield _event({"type": "message_start", "message": start})
    for i, block in enumerate(whole["content"]):
        if block["type"] == "tool_use":
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        yield _event({"type": "content_block_start", "index": i, "content_block": opened})
        yield _event({"type": "content_block_delta", "index": i, "delta": delta})
        yield _event({"type": "content_block_stop", "index": i})
    stop = {"stop_reason": whole.get("stop_reason"), "stop_sequence": None}
    yield _event({"type": "message_delta", "delta": stop,
                  "usage": {"output_tokens": usage.get("output_tokens", 0)}})  # fmt: skip
    yield _event({"type": "message_stop"})


TELLERS = {RESPONSES: response, MESSAGES: message}


def events(shape: Shape, whole: dict[str, Any]) -> Iterator[bytes]:
    """The stream of `whole` for `shape`'s client."""
    return TELLERS[shape.path](shape, whole)
