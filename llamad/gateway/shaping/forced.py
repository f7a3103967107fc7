"""Forced tool calls: which tools a request forces, the JSON schema that constrains the
generation to one call of them, and the call read back from the generated text.

llama-server sends no grammar for `tool_choice: "required"` with a generic template and
rejects the object form that names a function, and its /v1/messages ignores
`tool_choice` altogether; so every forced call is constrained here, the same way for
every template: the output is the tool's arguments under its parameters' schema, or
`{"name": NAME, "arguments": {...}}` when the call may be to any of several tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llamad.gateway.relay.proxy import Bad

ANY_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class Tool:
    """A function the model may be made to call, and its parameters' schema."""

    name: str
    parameters: dict[str, Any]


def _tools(path: str, doc: dict[str, Any]) -> list[Tool]:
    """The request's function tools, in any family's shape (what is not one is skipped)."""
    out = []
    items = doc.get("tools")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        fn: Any
        if path == "/v1/messages":  # {name, input_schema}
            fn, key = item, "input_schema"
        elif path == "/v1/responses":  # {type: function, name, parameters}
            fn, key = item, "parameters"
        else:  # {type: function, function: {name, parameters}}
            fn, key = item.get("function"), "parameters"
        if not isinstance(fn, dict):
            continue
        name, params = fn.get("name"), fn.get(key)
        if isinstance(name, str) and name:
            out.append(Tool(name, params if isinstance(params, dict) and params else ANY_OBJECT))
    return out


def _named(path: str, choice: Any) -> str | bool | None:
    """The function `choice` names; True for any (`required`, Anthropic's `any`); None
    when it forces nothing."""
    if choice == "required":
        return True
    if not isinstance(choice, dict):
        return None
    of_type = choice.get("type")
    if path == "/v1/messages":
        if of_type == "any":
            return True
        return choice.get("name") if of_type == "tool" else None
    if of_type != "function":
        return None
    if path == "/v1/responses":
        return choice.get("name")
    function = choice.get("function")
    return function.get("name") if isinstance(function, dict) else None


def forced(path: str, doc: dict[str, Any]) -> list[Tool] | None:
    """The tools of which the answer must call one, or None when none is forced; Bad
    when the call is forced and no tool fits (OpenAI's 400: an answer in text would
    only fail the client later, where it parses the call)."""
    named = _named(path, doc.get("tool_choice"))
    if named is None:
        return None
    tools = _tools(path, doc)
    chosen = tools if named is True else [t for t in tools if t.name == named]
    if chosen:
        return chosen
    if named is True:
        raise Bad("`tool_choice` forces a tool call, and `tools` has no function to call")
    raise Bad(f"`tool_choice` names {json.dumps(named)[:80]}, which is no function in `tools`")


def schema(tools: list[Tool]) -> dict[str, Any]:
    """The output that calls one of `tools`: one tool's arguments alone (its name is
    known, and every token costs), else the name first, then arguments under its schema."""
    if len(tools) == 1:
        return tools[0].parameters
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": t.parameters},
            "required": ["name", "arguments"],
        }
        for t in tools
    ]
    return {"anyOf": calls}


def parse(text: str, tools: list[Tool]) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of the call `text` holds, or None when it was cut short."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    if len(tools) == 1:
        return tools[0].name, doc
    name, arguments = doc.get("name"), doc.get("arguments")
    if name not in {t.name for t in tools} or not isinstance(arguments, dict):
        return None
    return name, arguments
