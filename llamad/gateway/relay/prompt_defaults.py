"""A model's request defaults (its store's system prompt and stop words) added to the
requests that do not set their own, as Ollama applies a model's `system` and `stop`.

Only upstreams whose model has such defaults get here (`Upstream.prompt`), so the
bodies of every other model go through unparsed.
"""

from __future__ import annotations

import json
from typing import Any

from llamad.backends.prompt import PromptDefaults

# llama-server's routes that render the chat template from `messages`.
_CHAT = frozenset({"/v1/chat/completions", "/chat/completions", "/apply-template"})
# Routes that take a `stop` list (a prompt the client rendered gets no system prompt).
_STOPS = frozenset(
    {"/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions"}
    | {"/completion", "/infill"}
)
_ANTHROPIC, _RESPONSES = "/v1/messages", "/v1/responses"
_SYSTEM_ROLES = ("system", "developer")


def apply(prompt: PromptDefaults, path: str, doc: dict[str, Any]) -> bool:
    """Add `prompt`'s defaults that `doc`, a request for `path`, lacks; True if any."""
    changed = False
    if prompt.system and path in _CHAT:
        messages = doc.get("messages")
        if isinstance(messages, list) and not any(
            isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES for m in messages
        ):
            doc["messages"] = [{"role": "system", "content": prompt.system}, *messages]
            changed = True
    if prompt.system and path == _ANTHROPIC and not doc.get("system"):
        doc["system"] = prompt.system
        changed = True
    if prompt.system and path == _RESPONSES and _no_system(doc):
        doc["instructions"] = prompt.system
        changed = True
    stop_key = "stop_sequences" if path == _ANTHROPIC else "stop" if path in _STOPS else None
    if prompt.stop and stop_key is not None and doc.get(stop_key) is None:
        doc[stop_key] = list(prompt.stop)
        changed = True
    return changed


def _no_system(doc: dict[str, Any]) -> bool:
    """A Responses request with neither `instructions` nor a system item in its input."""
    items = doc.get("input")
    return not doc.get("instructions") and not (
        isinstance(items, list)
        and any(isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES for m in items)
    )


def with_defaults(prompt: PromptDefaults, path: str, body: bytes) -> bytes:
    """`body` with `prompt`'s defaults added (unchanged when it has them or is not JSON)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict) or not apply(prompt, path, doc):
        return body
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
