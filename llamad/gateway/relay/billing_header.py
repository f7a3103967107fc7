"""Claude Code's billing block, made stable so a prefix cache (and replica affinity) can
reuse its prompt.

Claude Code opens `system` with a text block
`x-anthropic-billing-header: cc_version=...; cc_entrypoint=...; cch=65abc;` whose `cch`
changes on every request: the prompt differs from its first tokens on, and llama-server
evaluates all of it again each turn. As llama.cpp's own Anthropic route does (PR
#21793, not in every build llamad may run), the value becomes a constant here, so the
block is the same on every request and the cache holds from the first token.
"""

from __future__ import annotations

import json
import re
from typing import Any

MARK = "x-anthropic-billing-header:"
STABLE = "fffff"
_CCH = re.compile(r"(\bcch=)[0-9A-Fa-f]+")
_ROUTES = ("/v1/messages", "/v1/messages/count_tokens")


def stabilise(path: str, body: bytes) -> bytes:
    """`body` with its billing block's `cch` made constant, on Anthropic's routes; any
    other body (no billing block in it) is returned as it is, unparsed."""
    if path not in _ROUTES or MARK.encode() not in body:
        return body
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict) or not _steady(doc):
        return body
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _steady(doc: dict[str, Any]) -> bool:
    """Make `doc`'s billing block stable in place; True if it changed."""
    system = doc.get("system")
    fixed = stable_system(system)
    if fixed == system:
        return False
    doc["system"] = fixed
    return True


def stable_system(system: object) -> object:
    """An Anthropic `system` (text or blocks) with its billing block stable: itself when
    it has none. As llama-server does, any text block starting with the header is one."""
    if isinstance(system, str):
        return _fixed(system)
    if not isinstance(system, list):
        return system
    return [
        {**b, "text": _fixed(b["text"])}
        if isinstance(b, dict) and isinstance(b.get("text"), str)
        else b
        for b in system
    ]


def _fixed(text: str) -> str:
    """`text` with the header's `cch` made constant, when it starts with the header."""
    return _CCH.sub(rf"\g<1>{STABLE}", text, count=1) if text.startswith(MARK) else text
