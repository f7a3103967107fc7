"""`llamactl status`'s line per TCP listener that is not serving: waiting for its
address (`gateway waiting for 100.64.1.2:8080 (address not available), next try in 4 s`)
or given up on it."""

from __future__ import annotations

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAMES = {"remote": "remote control"}


def listener_lines(doc: dict[str, Any]) -> list[str]:
    """A line per listener of `daemon.listeners` that is waiting or failed."""
    lines = []
    for name, b in ((doc.get("daemon") or {}).get("listeners") or {}).items():
        who, listen, error = NAMES.get(name, name), b.get("listen"), b.get("error")
        if b.get("state") == "waiting":
            left = b.get("next_try_s")
            soon = "" if left is None else f", next try in {left:.0f} s"
            lines.append(f"{who} waiting for {listen} ({error}){soon}")
        elif b.get("state") == "failed":
            lines.append(f"{who} not listening: {listen} cannot be bound ({error})")
    return lines
