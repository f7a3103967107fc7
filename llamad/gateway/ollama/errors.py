"""Ollama's error shape, `{"error": "..."}`, and reading a field of a request body (which
the door has read and parsed: `access/body.py`)."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

from llamad.gateway.contract.port import GatewayError


class OllamaError(Exception):
    """A request the Ollama layer refuses, with the status Ollama itself would answer."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def error_response(status: int, message: str, retry_after: float | None = None) -> JSONResponse:
    """Ollama's error body: `{"error": message}` (with Retry-After when the gateway gave one)."""
    headers = {"Retry-After": str(max(1, round(retry_after)))} if retry_after else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def from_gateway(exc: GatewayError) -> OllamaError:
    """The gateway's refusal (unknown model, failed load, full queue...) in Ollama's terms."""
    return OllamaError(exc.status, exc.message, exc.retry_after)


def not_found(name: str) -> OllamaError:
    """What Ollama answers for a model it does not have."""
    return OllamaError(404, f'model "{name}" not found')


def field(
    body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None
) -> Any:
    """`body[key]` checked against `kind` (None counts as absent); 400 on a wrong type."""
    value = body.get(key)
    if value is None:
        return default
    # bool is an int in Python; JSON true is never a number here.
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise OllamaError(400, f"{key!r} has the wrong type: {json.dumps(value)}")
    if not isinstance(value, kind):
        raise OllamaError(400, f"{key!r} has the wrong type: {json.dumps(value)[:80]}")
    return value
