"""How big a forced call's schema is as a grammar, counted before anything is built.

Both the compact grammar (grammar.py) and llama-server's own conversion give each
branch of a `type` list a copy of the schema it sits in, so a schema of a few hundred
bytes can stand for millions of rules; and llama-server's sampling slows past linear
with the alternatives (enum values) of a grammar. A schema over the limit is refused.
"""

from __future__ import annotations

from typing import Any

from llamad.gateway.access.limits import MAX_SCHEMA_NODES
from llamad.gateway.relay.proxy import Bad


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


def check(schema: dict[str, Any]) -> None:
    """Bad when `schema` stands for a grammar over MAX_SCHEMA_NODES nodes, or is nested
    deeper than the gateway follows."""
    try:
        _nodes(schema, MAX_SCHEMA_NODES)
    except (_Over, RecursionError):
        message = (
            f"the tools' parameter schemas are too large to force a call with: over "
            f"{MAX_SCHEMA_NODES} nodes, counting each enum value and each branch of a "
            "`type` list as a copy of its schema"
        )
        raise Bad(message) from None
