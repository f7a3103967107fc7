"""Which requests the gateway shapes itself, and what it sends llama-server for them:
one decision, made once per request from its path and body."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llamad.gateway.access.limits import MAX_CHOICES
from llamad.gateway.relay.proxy import Bad
from llamad.gateway.shaping.forced import Tool, forced, schema
from llamad.gateway.shaping.grammar import compact
from llamad.gateway.shaping.messages_chat import chat_of_messages
from llamad.gateway.shaping.prompt_tokens import asked as logprobs_asked

CHAT, COMPLETIONS, RESPONSES, MESSAGES = (
    "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
)  # fmt: skip
# Keys that ask for a stream or for several choices: the gateway does both itself.
_OWN = ("stream", "stream_options", "n", "echo", "tools", "tool_choice")


@dataclass(frozen=True)
class Shape:
    """A shaped request: the client's route, the body of one upstream request per choice
    and where it goes, and what the answer gets."""

    path: str
    upstream_path: str
    bodies: list[dict[str, Any]]
    tools: list[Tool] | None = None
    echo: str | None = None  # the prompt, prepended to each choice's text
    prompt_logprobs: bool = False  # the echoed prompt's tokens lead each choice's logprobs
    stream: bool = False
    include_usage: bool = False


def _count(doc: dict[str, Any]) -> int:
    """How many choices the request asks for; Bad for an `n` that is not a count of
    them (the gateway runs each choice, so it is held here, not left to llama-server)."""
    n = doc.get("n")
    if n is None:
        return 1
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CHOICES:
        raise Bad(f"`n` must be an integer from 1 to {MAX_CHOICES}, not {json.dumps(n)[:40]}")
    return n


def _several_prompts(doc: dict[str, Any]) -> bool:
    """A completions body with a list of prompts (llama-server runs each: `n` of them
    would be n times as many, and each answer's first choice alone is read)."""
    prompt = doc.get("prompt")
    tokens = isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)
    return isinstance(prompt, list) and len(prompt) > 1 and not tokens


def _echo(path: str, doc: dict[str, Any]) -> str | None:
    if path != COMPLETIONS or doc.get("echo") is not True:
        return None
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    return prompt if isinstance(prompt, str) else None  # token ids: not echoed


def shape_of(path: str, doc: Any) -> Shape | None:
    """The shape of a request that needs the gateway (a forced tool call, `n` > 1,
    `echo`), or None for one relayed as it came; Bad for one the gateway cannot shape."""
    if path not in (CHAT, COMPLETIONS, RESPONSES, MESSAGES) or not isinstance(doc, dict):
        return None
    tools = forced(path, doc) if path != COMPLETIONS else None
    n = _count(doc) if path in (CHAT, COMPLETIONS) else 1
    if n > 1 and path == COMPLETIONS and _several_prompts(doc):
        raise Bad("`n` > 1 takes one prompt; send several prompts one request each")
    echo = _echo(path, doc)
    if tools is None and n == 1 and echo is None:
        return None
    one = {k: v for k, v in doc.items() if k not in _OWN}
    upstream_path = path
    if tools is not None:
        wanted = schema(tools)  # its size: the door's (access/schemas.py)
        if path == MESSAGES:  # llama-server's /v1/messages takes no schema: sent as chat
            one, upstream_path = chat_of_messages(one), CHAT
        grammar = compact(wanted) if upstream_path == CHAT else None
        if grammar is not None:
            one["grammar"] = grammar
        else:
            one["response_format"] = {"type": "json_object", "schema": wanted}
    bodies = [one]
    seed = one.get("seed")
    for i in range(1, n):  # each choice its own sample, also under a seed
        bodies.append({**one, "seed": seed + i} if isinstance(seed, int) else dict(one))
    options = doc.get("stream_options")
    return Shape(
        path=path,
        upstream_path=upstream_path,
        bodies=bodies,
        tools=tools,
        echo=echo,
        prompt_logprobs=echo is not None and logprobs_asked(doc),
        stream=doc.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )
