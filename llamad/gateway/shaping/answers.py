"""The whole answer in the client's shape, from llama-server's answers to a shaped
request (one per choice): choices numbered, usage summed, a forced call read out of the
generated text into the family's tool-call form, the prompt echoed."""

from __future__ import annotations

import json
import secrets
from typing import Any

from llamad.gateway.shaping.counts import summed
from llamad.gateway.shaping.forced import Tool, parse
from llamad.gateway.shaping.plan import CHAT, COMPLETIONS, MESSAGES, RESPONSES, Shape

_STOPS = {"length": "max_tokens", "tool_calls": "tool_use"}  # chat's -> Anthropic's


def new_id(prefix: str) -> str:
    """A fresh id for what the gateway makes up: a call, a message, an answer."""
    return prefix + secrets.token_hex(12)


def _call(text: Any, tools: list[Tool] | None) -> tuple[str, dict[str, Any]] | None:
    return parse(text, tools) if tools and isinstance(text, str) else None


def _chat_choice(choice: dict[str, Any], index: int, tools: list[Tool] | None) -> dict[str, Any]:
    out = {**choice, "index": index}
    message = choice.get("message") or {}
    if (call := _call(message.get("content"), tools)) is not None:
        name, arguments = call
        function = {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}
        tool_call = {"id": new_id("call_"), "type": "function", "function": function}
        out["message"] = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        out["finish_reason"] = "tool_calls"
    return out


def chat(shape: Shape, answers: list[dict[str, Any]], asked: str) -> dict[str, Any]:
    """A chat completion with a choice from each answer."""
    choices = [_chat_choice(a["choices"][0], i, shape.tools) for i, a in enumerate(answers)]
    return {
        **answers[0],
        "model": asked,
        "choices": choices,
        "usage": summed(a.get("usage") for a in answers),
    }


def completion(shape: Shape, answers: list[dict[str, Any]], asked: str) -> dict[str, Any]:
    """A text completion with a choice from each answer, the prompt echoed if asked."""
    choices = []
    for i, a in enumerate(answers):
        choice = {**a["choices"][0], "index": i}
        if shape.echo is not None:
            choice["text"] = shape.echo + (choice.get("text") or "")
        choices.append(choice)
    return {
        **answers[0],
        "model": asked,
        "choices": choices,
        "usage": summed(a.get("usage") for a in answers),
    }


def _output_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def response(shape: Shape, answers: list[dict[str, Any]], asked: str) -> dict[str, Any]:
    """A Responses answer whose message, when it holds the forced call, is a
    `function_call` item instead."""
    out = {**answers[0], "model": asked}
    items = []
    for item in out.get("output") or []:
        call = _call(_output_text(item), shape.tools) if item.get("type") == "message" else None
        if call is None:
            items.append(item)
            continue
        name, arguments = call
        items.append({
            "type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": name,
            "arguments": json.dumps(arguments, ensure_ascii=False), "status": "completed",
        })  # fmt: skip
    out["output"] = items
    return out


def message(shape: Shape, answers: list[dict[str, Any]], asked: str) -> dict[str, Any]:
    """An Anthropic message from the chat answer its request was sent as."""
    choice = _chat_choice(answers[0]["choices"][0], 0, shape.tools)
    said = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    for call in said.get("tool_calls") or []:
        fn = call["function"]
        block = {"type": "tool_use", "id": new_id("toolu_"), "name": fn["name"]}
        content.append({**block, "input": json.loads(fn["arguments"])})
    if not content:
        content.append({"type": "text", "text": said.get("content") or ""})
    usage = answers[0].get("usage") or {}
    finish = choice.get("finish_reason") or "stop"
    return {
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": asked,
        "content": content, "stop_reason": _STOPS.get(finish, "end_turn"), "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        },
    }  # fmt: skip


BUILDERS = {CHAT: chat, COMPLETIONS: completion, RESPONSES: response, MESSAGES: message}


def whole(shape: Shape, answers: list[dict[str, Any]], asked: str) -> dict[str, Any]:
    """The answer to `shape`'s client."""
    return BUILDERS[shape.path](shape, answers, asked)
