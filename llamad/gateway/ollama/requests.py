"""Ollama's /api/chat and /api/generate requests as llama-server requests.

- /api/chat -> /v1/chat/completions (messages, images, tools, format, think, options).
- /api/generate with `suffix` -> /infill (fill in the middle).
- /api/generate with `raw` -> /completion (the prompt goes to the model as is).
- /api/generate otherwise -> /v1/chat/completions with `system` and the prompt as messages,
  so the model's own chat template applies, as Ollama's template would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from llamad.gateway.ollama.errors import OllamaError, field
from llamad.gateway.ollama.options import chat_format, completion_format, sampling
from llamad.gateway.ollama.stream import ChatEvents, CompletionEvents, Events

log = structlog.get_logger("llamad.gateway.ollama")


@dataclass(frozen=True)
class Plan:
    """Where a request goes upstream, with which body, and how to read the answer."""

    path: str
    body: dict[str, Any]
    events: Callable[[], Events]


def _image_url(data: object) -> dict[str, Any]:
    if not isinstance(data, str):
        raise OllamaError(400, "images must be base64 strings")
    mime = "image/png" if data.startswith("iVBOR") else "image/jpeg"
    if data.startswith("R0lGOD"):
        mime = "image/gif"
    elif data.startswith("UklGR"):
        mime = "image/webp"
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _content(text: str, images: list[Any] | None) -> str | list[dict[str, Any]]:
    if not images:
        return text
    return [{"type": "text", "text": text}, *(_image_url(i) for i in images)]


def _tool_calls(calls: list[Any]) -> list[dict[str, Any]]:
    """Ollama's tool calls as OpenAI's; what is not a call (no function object) is
    skipped."""
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        args = fn.get("arguments", {})
        out.append(
            {
                "id": call.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": fn.get("name", ""),
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out


def openai_message(msg: object) -> dict[str, Any]:
    """One Ollama chat message as an OpenAI one."""
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
        raise OllamaError(400, "each message needs a string 'role'")
    out: dict[str, Any] = {
        "role": msg["role"],
        "content": _content(str(msg.get("content") or ""), field(msg, "images", list)),
    }
    if msg.get("tool_calls"):
        out["tool_calls"] = _tool_calls(field(msg, "tool_calls", list))
    if msg.get("thinking"):
        out["reasoning_content"] = field(msg, "thinking", str)
    if msg.get("tool_name"):
        out["name"] = field(msg, "tool_name", str)
    if msg.get("tool_call_id"):
        out["tool_call_id"] = field(msg, "tool_call_id", str)
    return out


def _chat_extras(body: dict[str, Any], model: str) -> dict[str, Any]:
    out = {
        **sampling(body.get("options"), model=model, max_tokens_key="max_tokens"),
        **chat_format(body.get("format")),
    }
    out.update(_logprobs(body))
    think = body.get("think")
    if think is not None:
        # true/false, or a level ("low", "medium", "high") for models that take one.
        out["chat_template_kwargs"] = {"enable_thinking": bool(think)}
        if isinstance(think, str):
            out["reasoning_effort"] = think
    return out


def _logprobs(body: dict[str, Any]) -> dict[str, Any]:
    """Ollama's `logprobs` and `top_logprobs` in OpenAI's terms (the same names)."""
    top = field(body, "top_logprobs", int, 0)
    if top < 0 or top > 20:
        raise OllamaError(400, "top_logprobs must be between 0 and 20")
    if not field(body, "logprobs", bool, False) and not top:
        return {}
    return {"logprobs": True, **({"top_logprobs": top} if top else {})}


def _stream_opts() -> dict[str, Any]:
    # The last chunk then carries the usage and timings that Ollama's last object reports.
    return {"stream": True, "stream_options": {"include_usage": True}}


def chat_plan(body: dict[str, Any], model: str, messages: list[Any]) -> Plan:
    """/api/chat -> /v1/chat/completions."""
    upstream: dict[str, Any] = {
        "model": model,
        "messages": [openai_message(m) for m in messages],
        **_stream_opts(),
        **_chat_extras(body, model),
    }
    tools = field(body, "tools", list)
    if tools:
        upstream["tools"] = tools
    return Plan("/v1/chat/completions", upstream, ChatEvents)


def generate_plan(body: dict[str, Any], model: str, prompt: str) -> Plan:
    """/api/generate -> /infill, /completion or /v1/chat/completions (see the module doc)."""
    if field(body, "template", str):
        log.info("ollama.template_ignored", model=model)
    images = field(body, "images", list)
    suffix = field(body, "suffix", str)
    if suffix is not None or field(body, "raw", bool, False):
        opts = sampling(body.get("options"), model=model, max_tokens_key="n_predict")
        extras = {**opts, **completion_format(body.get("format")), "stream": True}
        if images:
            log.info("ollama.images_ignored", model=model, reason="raw or suffix request")
        if suffix is not None:
            return Plan(
                "/infill",
                {"input_prefix": prompt, "input_suffix": suffix, **extras},
                CompletionEvents,
            )
        return Plan("/completion", {"prompt": prompt, **extras}, CompletionEvents)
    messages: list[dict[str, Any]] = []
    system = field(body, "system", str)
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": _content(prompt, images)})
    upstream = {"model": model, "messages": messages, **_stream_opts(), **_chat_extras(body, model)}
    return Plan("/v1/chat/completions", upstream, ChatEvents)
