"""An Anthropic Messages request as an OpenAI chat request, for the forced tool calls
that llama-server's own /v1/messages cannot constrain (it takes no schema)."""

from __future__ import annotations

import json
from typing import Any

from llamad.gateway.relay.billing_header import stable_system

# Sampling keys both APIs spell alike, and Anthropic's that chat spells otherwise.
_SAME = ("max_tokens", "temperature", "top_p", "top_k")
_RENAMED = {"stop_sequences": "stop"}


def _is_text(block: Any) -> bool:
    """A text block (one whose text is not a string is no text: skipped)."""
    if not isinstance(block, dict) or block.get("type") != "text":
        return False
    return isinstance(block.get("text"), str)


def _text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks if _is_text(b))


def _message(role: str, content: Any) -> list[dict[str, Any]]:
    """One Anthropic message as chat messages: tool results become `tool` messages,
    tool uses the assistant's `tool_calls`, images `image_url` parts."""
    if not isinstance(content, list):
        return [{"role": role, "content": _text(content)}]
    parts: list[dict[str, Any]] = []
    calls, results = [], []
    for block in content:
        if not isinstance(block, dict):
            continue
        of_type = block.get("type")
        if _is_text(block):
            parts.append({"type": "text", "text": block["text"]})
        elif of_type == "image" and isinstance(source := block.get("source"), dict):
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif of_type == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            function = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        elif of_type == "tool_result":
            text = _text(block.get("content"))
            results.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}
            )
    out: list[dict[str, Any]] = list(results)
    if parts or calls:
        only_text = all(p["type"] == "text" for p in parts)
        body: Any = "".join(p["text"] for p in parts) if only_text else parts
        message: dict[str, Any] = {"role": role, "content": body}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def chat_of_messages(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (a Messages body without its tools) as a chat completions body."""
    messages = []
    # Sent as chat, the route no longer says Anthropic: Claude Code's billing block is
    # made stable here, as on /v1/messages, or its prompt is evaluated anew each turn.
    if system := _text(stable_system(doc.get("system"))):
        messages.append({"role": "system", "content": system})
    given = doc.get("messages")
    for m in given if isinstance(given, list) else []:
        if isinstance(m, dict):
            messages.extend(_message(str(m.get("role", "user")), m.get("content")))
    out: dict[str, Any] = {"model": doc.get("model"), "messages": messages}
    out.update({k: doc[k] for k in _SAME if k in doc})
    out.update({new: doc[old] for old, new in _RENAMED.items() if old in doc})
    return out
