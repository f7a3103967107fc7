"""A JSON schema as a GBNF grammar with no optional whitespace, for forced tool calls.

llama-server's own schema-to-grammar allows runs of spaces, tabs and newlines between
tokens, and a small model at temperature 0 can spend its whole budget there. The
schemas tools carry are mostly plain (objects of strings, numbers, enums, arrays); those
become a compact grammar here, and anything else (`$ref`, patterns, ...) goes to
llama-server as a schema (None).
"""

from __future__ import annotations

import json
from typing import Any

_PRIMITIVES = {
    "string": '"\\"" char* "\\""',
    "integer": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "number": '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
}
_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'


class _Unsupported(Exception):
    pass


def _listed(value: Any) -> list[Any]:
    """`value` if it is a non-empty list (an enum's values, anyOf's schemas)."""
    if not isinstance(value, list) or not value:
        raise _Unsupported
    return value


def _literal(value: Any) -> str:
    """A GBNF literal matching `value` as compact JSON."""
    return json.dumps(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class _Builder:
    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def rule(self, body: str) -> str:
        name = f"r{len(self.rules)}"
        self.rules[name] = body
        return name

    def of(self, schema: Any) -> str:
        if schema is True or schema == {}:
            raise _Unsupported  # any JSON value: left to llama-server
        if not isinstance(schema, dict) or "$ref" in schema or "pattern" in schema:
            raise _Unsupported
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return "(" + " | ".join(_literal(v) for v in _listed(schema["enum"])) + ")"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return "(" + " | ".join(self.rule(self.of(s)) for s in _listed(schema[key])) + ")"
        of_type = schema.get("type")
        if not isinstance(of_type, str | list | None):
            raise _Unsupported  # not a schema: llama-server says what is wrong with it
        if isinstance(of_type, list):
            each = (self.rule(self.of({**schema, "type": k})) for k in _listed(of_type))
            return "(" + " | ".join(each) + ")"
        if of_type in _PRIMITIVES:
            return "(" + _PRIMITIVES[of_type] + ")"
        if of_type == "array":
            item = self.rule(self.of(schema.get("items", {})))
            return f'"[" ({item} ("," {item})*)? "]"'
        if of_type == "object" or "properties" in schema:
            props = schema.get("properties") or {}
            if not props or not isinstance(props, dict):
                raise _Unsupported  # an open object: any keys
            # Every property, in order: optional ones too (the output still follows the
            # schema, and a grammar of optional commas grows with their number).
            parts = [f'{_literal(k)} ":" {self.rule(self.of(v))}' for k, v in props.items()]
            return '"{" ' + ' "," '.join(parts) + ' "}"'
        raise _Unsupported


def compact(schema: dict[str, Any]) -> str | None:
    """The grammar of `schema` with no whitespace, or None when it is not plain."""
    builder = _Builder()
    try:
        root = builder.of(schema)
    except (_Unsupported, RecursionError):
        return None
    lines = [f"root ::= {root}", *(f"{k} ::= {v}" for k, v in builder.rules.items()), _CHAR]
    return "\n".join(lines)
