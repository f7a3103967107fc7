"""docs/troubleshooting.md has an entry (a `### \\`code\\`` heading) for every error code
the gateway answers with: each `GatewayError`'s, each refusal's of the listener and the
door, and the route table's 404 and 405."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from doc_pages import DOCS, ROOT, headings

from llamad.gateway.contract.port import GatewayError
from llamad.listener import limits

PAGE = DOCS / "troubleshooting.md"
# Modules whose GatewayError subclasses carry codes of their own.
_ERRORS = (
    "llamad.gateway.contract.port",
    "llamad.gateway.relay.proxy",
    "llamad.gateway.models.downloads",
    "llamad.gateway.admission.room_rules",
)
# A literal code handed to a refusal in the gateway's and the listener's source.
_LITERAL = re.compile(r"Refusal\(\s*\d{3},\s*\"([a-z_]+)\"|_counted\([^,]+,\s*\"([a-z_]+)\"")


def documented() -> set[str]:
    return {h.text.strip("`") for h in headings(PAGE) if h.level == 3}


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def answered() -> set[str]:
    for name in _ERRORS:
        importlib.import_module(name)
    codes = {GatewayError.code} | {c.code for c in _subclasses(GatewayError)}
    for fn in vars(limits).values():
        sig = inspect.signature(fn) if inspect.isfunction(fn) else None
        if sig is not None and sig.return_annotation in ("Refusal", limits.Refusal):
            args = [limits.Limits() if p == "limits" else 1 for p in sig.parameters]
            if "version" in sig.parameters:
                args = ["2.0"]
            codes.add(fn(*args).reason)
    sources = [*(ROOT / "llamad/gateway").rglob("*.py"), *(ROOT / "llamad/listener").rglob("*.py")]
    for path in sources:
        for m in _LITERAL.finditer(Path(path).read_text()):
            codes.add(m.group(1) or m.group(2))
    from llamad.gateway.access.door import _NOT_FOUND

    return codes | {code for code, _ in _NOT_FOUND.values()}


def test_every_code_the_gateway_answers_with_has_an_entry() -> None:
    codes = answered()
    assert {"invalid_api_key", "queue_timeout", "head_too_large", "not_found"} <= codes
    assert sorted(codes - documented()) == []


def test_no_entry_is_for_a_code_that_does_not_exist() -> None:
    assert sorted(documented() - answered()) == []
