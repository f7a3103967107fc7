"""llama-server's error answers, with an honest status, in the route's family's shape.

llama-server answers OpenAI's shape on every route, /v1/messages too, and a few of its
statuses blame itself for what the client got wrong: an image for a model without an
mmproj is its 500, an endpoint the instance does not serve (embeddings) its 501. The
OpenAI SDK retries any 5xx twice, so those become 400s; a body already in the right shape
with an honest status passes through untouched.
"""

from __future__ import annotations

import json
from typing import Any

from llamad.gateway.contract.families import family, gateway_shape

# Messages of llama-server errors that are the client's, whatever status it gave.
_CLIENT_MISTAKES = (
    "image input is not supported", "audio input is not supported",
    # A field of the wrong type in the messages or tools (a `name` that is a number).
    "Failed to parse messages", "Failed to parse tools",
)  # fmt: skip


def parse(raw: bytes) -> tuple[str, str]:
    """(message, type) of an error body: OpenAI-shaped, a string, or plain text."""
    try:
        doc: Any = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip() or "llama-server error", ""
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        return str(err.get("message", err)), str(err.get("type") or "")
    return str(err or doc), ""


def honest_status(status: int, message: str, etype: str = "") -> int:
    """The status the client should see for llama-server's `status`."""
    if status == 501 or etype == "not_supported_error":
        return 400  # this instance does not serve it: ask another model
    if status >= 500 and any(m in message for m in _CLIENT_MISTAKES):
        return 400
    return status


def refit(path: str, status: int, raw: bytes) -> tuple[int, bytes]:
    """An upstream error answer for the client of `path`: (status, body)."""
    message, etype = parse(raw)
    honest = honest_status(status, message, etype)
    if honest == status and family(path) == "openai":
        return status, raw
    return honest, gateway_shape(path, honest, etype or "upstream_error", message)
