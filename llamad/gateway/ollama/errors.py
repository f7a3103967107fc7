"""Ollama's error shape, `{"error": "..."}`, and reading a request body into a dict."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from llamad.gateway.port import GatewayError
from llamad.gateway.shapes import valid_text


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


async def read_body(request: Request, *, allow_empty: bool = False) -> dict[str, Any]:
    """The request's JSON object; 400 when it is not valid JSON or not an object."""
    raw = await request.body()
    if not raw.strip():
        if allow_empty:
            return {}
        raise OllamaError(400, "missing request body")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise OllamaError(400, f"invalid JSON in request body: {exc}") from exc
    except RecursionError:
        raise OllamaError(400, "invalid JSON in request body: nested too deeply") from None
    if not isinstance(body, dict):
        raise OllamaError(400, "request body must be a JSON object")
    return body


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


def model_name(body: dict[str, Any]) -> str:
    """The requested model (`model`, or the older `name`); 400 when missing."""
    name = field(body, "model", str) or field(body, "name", str)
    if not name:
        raise OllamaError(400, "model is required")
    if not valid_text(name):
        raise OllamaError(400, "model is not valid Unicode (a lone surrogate)")
    return str(name)
