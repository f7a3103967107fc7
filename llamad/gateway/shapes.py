"""The gateway's two error shapes: OpenAI's error object, and Ollama's `{"error": "..."}`
under `/api`. A refusal made before any route runs (a limit, an origin, a key) is given in
the shape of the family its path belongs to, so each client can read it."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import Send


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """OpenAI's error shape."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def is_ollama(path: str) -> bool:
    """`path` is one of the Ollama routes (or would be)."""
    return path == "/api" or path.startswith("/api/")


def gateway_shape(path: str, status: int, code: str, message: str) -> bytes:
    """A refusal in its API family's shape: Ollama's `{"error": "..."}` under /api, else
    OpenAI's."""
    if is_ollama(path):
        return json.dumps({"error": message}).encode()
    return json.dumps(error_body(status, code, message)).encode()


async def refuse(
    send: Send,
    path: str,
    status: int,
    code: str,
    message: str,
    retry_after: float | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer `status` in `path`'s family shape (with Retry-After when given)."""
    body = gateway_shape(path, status, code, message)
    out = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        out.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
    out += headers or []
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


def valid_text(text: str) -> bool:
    """`text` can be written as UTF-8: JSON's `\\ud800` escapes make strings that cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
