"""Which API family a path belongs to, and each family's error shape.

OpenAI's `{"error": {"message", "type", "param", "code"}}` is the default; Ollama's
`{"error": "..."}` answers under /api (and /); Anthropic's `{"type": "error", "error":
{"type", "message"}}` under /v1/messages. Every refusal the gateway writes itself (limits,
keys, unknown routes, model errors) and every upstream error it relays goes through here.
"""

from __future__ import annotations

import json
from typing import Any, Literal

Family = Literal["openai", "ollama", "anthropic"]

# Anthropic's error types by status (its API reference, "Errors").
_ANTHROPIC = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def family(path: str) -> Family:
    """The API family a request path belongs to."""
    if path == "/api" or path.startswith("/api/") or path == "/":
        return "ollama"
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return "anthropic"
    return "openai"


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """OpenAI's error shape."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def error_doc(path: str, status: int, code: str, message: str) -> dict[str, Any]:
    """The error document for `path`'s family."""
    match family(path):
        case "ollama":
            return {"error": message}
        case "anthropic":
            kind = _ANTHROPIC.get(status, "api_error" if status >= 500 else "invalid_request_error")
            return {"type": "error", "error": {"type": kind, "message": message}}
    return error_body(status, code, message)


def gateway_shape(path: str, status: int, code: str, message: str) -> bytes:
    """A refusal in its API family's shape, as JSON bytes."""
    return json.dumps(error_doc(path, status, code, message)).encode()
