"""Pins, groups, exclusive sets and names that choose, under `llamactl status`'s
gateway table: one line each."""

from __future__ import annotations

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def set_lines(doc: dict[str, Any]) -> list[str]:
    """`pinned: a, b`, `group NAME: a, b`, `exclusive NAME: a, b` and
    `name NAME: a, b -> now b`, for those the config has."""
    gw = doc.get("gateway") or {}
    pinned = [
        str(i.get("name"))
        for i in doc.get("instances") or []
        if (i.get("gateway") or {}).get("pinned")
    ]
    lines = [f"pinned: {', '.join(pinned)}"] if pinned else []
    for label, section in (("group", "groups"), ("exclusive", "exclusive")):
        for name, models in (gw.get(section) or {}).items():
            lines.append(f"{label} {name}: {', '.join(models)}")
    for name, chooser in (gw.get("names") or {}).items():
        now = chooser.get("now") or "none"
        lines.append(f"name {name}: {', '.join(chooser.get('models') or [])} -> now {now}")
    return lines
