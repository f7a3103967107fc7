"""JSON mode that llama-server enforces.

llama-server constrains output to JSON only when a schema comes with the request: OpenAI's
`response_format: {"type": "json_object"}` alone gives free text, and `/v1/responses`
ignores `text.format` altogether; `/v1/completions` honours only its own `json_schema`.
So JSON mode gets the smallest schema llama-server enforces (`{"type": "object"}`), and a
schema the client sent goes where llama-server reads it, unchanged.
"""

from __future__ import annotations

import json
from typing import Any

OBJECT: dict[str, Any] = {"type": "object"}
_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/responses")


def enforce(path: str, body: bytes) -> bytes:
    """`body` with its JSON mode in the form llama-server enforces; most bodies (no
    `json_` in them) are returned as they are, unparsed."""
    if path not in _PATHS or b"json_" not in body:
        return body
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    schema = _wanted(doc, path)
    if schema is None:
        return body
    if path == "/v1/completions":
        doc.pop("response_format", None)
        doc["json_schema"] = schema
    else:
        doc["response_format"] = {"type": "json_object", "schema": schema}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _wanted(doc: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The schema the request asks for (OBJECT for plain JSON mode), or None."""
    if path == "/v1/responses":
        text = doc.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
    else:
        fmt = doc.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        schema = fmt.get("schema")
        given = isinstance(schema, dict) and bool(schema)  # `{}` is not enforced
        if given and path == "/v1/chat/completions":
            return None  # llama-server enforces this one itself
        return schema if given and isinstance(schema, dict) else OBJECT
    if fmt.get("type") == "json_schema":
        if path == "/v1/chat/completions":
            return None  # enforced as sent
        # Responses: {type, name, schema}; completions: {type, json_schema: {schema}}.
        inner = fmt.get("json_schema") if isinstance(fmt.get("json_schema"), dict) else fmt
        schema = inner.get("schema") if isinstance(inner, dict) else None
        return schema if isinstance(schema, dict) else None
    return None


def ollama_json() -> dict[str, Any]:
    """`format: "json"` for /v1/chat/completions: a JSON object, enforced."""
    return {"response_format": {"type": "json_object", "schema": OBJECT}}
