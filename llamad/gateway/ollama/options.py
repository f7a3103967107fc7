"""Ollama's `options` and `format` as llama-server sampling parameters."""

from __future__ import annotations

from typing import Any

import structlog

from llamad.gateway.ollama.errors import OllamaError
from llamad.gateway.relay.jsonmode import ollama_json

log = structlog.get_logger("llamad.gateway.ollama")

# Ollama option -> llama-server parameter, the same name on /v1/chat/completions and /completion.
_SAMPLING = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
    "repeat_last_n": "repeat_last_n",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "mirostat": "mirostat",
    "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta",
    "num_keep": "n_keep",
}


def sampling(options: object, *, model: str, max_tokens_key: str) -> dict[str, Any]:
    """llama-server parameters for Ollama `options`; the rest is ignored with a logged note.

    `num_ctx` and the load-time options (num_gpu, num_thread, ...) belong to the instance's
    config in llamad, not to a request.
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise OllamaError(400, "'options' must be an object")
    out: dict[str, Any] = {}
    ignored = []
    for key, value in options.items():
        if key == "num_predict":
            # Ollama: -1 is "no limit", -2 "fill the context"; llama-server: -1 is no limit.
            if isinstance(value, int) and not isinstance(value, bool):
                out[max_tokens_key] = -1 if value < 0 else value
        elif key in _SAMPLING:
            out[_SAMPLING[key]] = value
        else:
            ignored.append(key)
    if ignored:
        log.info("ollama.options_ignored", model=model, options=sorted(ignored))
    return out


def chat_format(fmt: object) -> dict[str, Any]:
    """`format` ("json" or a JSON schema) for /v1/chat/completions."""
    if fmt in (None, ""):
        return {}
    if fmt == "json":
        return ollama_json()
    if isinstance(fmt, dict):
        return {"response_format": {"type": "json_schema", "json_schema": {"schema": fmt}}}
    raise OllamaError(400, f'invalid format: {fmt!r} (use "json" or a JSON schema)')


def completion_format(fmt: object) -> dict[str, Any]:
    """`format` ("json" or a JSON schema) for /completion and /infill."""
    if fmt in (None, ""):
        return {}
    if fmt == "json":
        return {"json_schema": {"type": "object"}}
    if isinstance(fmt, dict):
        return {"json_schema": fmt}
    raise OllamaError(400, f'invalid format: {fmt!r} (use "json" or a JSON schema)')
