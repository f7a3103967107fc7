"""How big the JSON schemas a request carries are, as the grammars they become.

A schema in a request (its tools' parameters, a response format, Ollama's `format`)
becomes a grammar: the gateway's own for a forced tool call, llama-server's otherwise.
Both give each branch of a `type` list a copy of the schema it sits in, so a schema of
a few hundred bytes can stand for millions of rules, and llama-server's sampling slows
past linear with the alternatives (enum values) of a grammar: one such request held a
model's every slot for minutes. The door counts them for every route, before anything
is built, and refuses a request whose schemas together pass MAX_SCHEMA_NODES.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llamad.gateway.access.limits import MAX_SCHEMA_NODES
from llamad.gateway.access.refusal import bad

# A body without one of these holds no schema: nothing is counted (the common case).
_MARKS = (b"schema", b'"tools"', b'"format"')


class _Over(Exception):
    pass


def _nodes(schema: Any, left: int) -> int:
    """The nodes of `schema` (every value in it, a `type` list's branches each a copy of
    the rest), or _Over once they pass `left`."""
    if isinstance(schema, list):
        total = 1
        for item in schema:
            total += _nodes(item, left - total)
    elif isinstance(schema, dict):
        kinds = schema.get("type")
        copies = len(kinds) if isinstance(kinds, list) and kinds else 1
        total = 1
        for value in schema.values():
            total += _nodes(value, left // copies - total)
        total *= copies
    else:
        total = 1
    if total > left:
        raise _Over
    return total


def _schemas(doc: dict[str, Any]) -> Iterator[Any]:
    """Where each API puts a schema: OpenAI's chat (a tool's function's `parameters`,
    `response_format.json_schema.schema`), its Responses API (a tool's `parameters`,
    `text.format.schema`), Anthropic's (a tool's `input_schema`), Ollama's (`format`),
    llama-server's own (`json_schema`, `response_format.schema`)."""
    tools = doc.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            function = tool.get("function")
            if isinstance(function, dict):
                yield function.get("parameters")
            yield tool.get("parameters")
            yield tool.get("input_schema")
    for key, inner in (("response_format", "json_schema"), ("text", "format")):
        outer = doc.get(key)
        if isinstance(outer, dict):
            yield outer.get("schema")
            if isinstance(nested := outer.get(inner), dict):
                yield nested.get("schema")
    yield doc.get("json_schema")
    yield doc.get("format")


def _count(doc: Any) -> None:
    """Raises _Over once the schemas in `doc` together pass MAX_SCHEMA_NODES."""
    left = MAX_SCHEMA_NODES
    for schema in _schemas(doc) if isinstance(doc, dict) else ():
        if schema is not None:
            left -= _nodes(schema, left)


def check(body: bytes, doc: Any = None) -> None:
    """A 400 when the schemas in a request pass MAX_SCHEMA_NODES together, or are nested
    deeper than the gateway follows. `doc` is the body as the door parsed it; a body
    relayed as it came (None) is parsed here only if it may hold a schema."""
    if not any(mark in body for mark in _MARKS):
        return
    if doc is None:
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return  # not JSON: llama-server says what is wrong with it
    try:
        _count(doc)
    except (_Over, RecursionError):
        message = (
            f"the request's JSON schemas (tools, response format) are too large: over "
            f"{MAX_SCHEMA_NODES} nodes, counting each enum value and each branch of a "
            "`type` list as a copy of its schema"
        )
        raise bad(message) from None
