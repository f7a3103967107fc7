"""`llamactl status`'s line while llamad keeps the system from idle sleep for the
gateway's requests (`[daemon] keep_awake`), or cannot."""

from __future__ import annotations

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def awake_lines(doc: dict[str, Any]) -> list[str]:
    """`keeping the system awake for the gateway's requests (caffeinate pid 812, 2m)`."""
    awake = (doc.get("daemon") or {}).get("keep_awake") or {}
    if awake.get("held"):
        held = awake.get("held_s")
        since = "" if held is None else f", {held // 60}m" if held >= 60 else f", {held}s"
        return [f"keeping the system awake for the gateway's requests "
                f"(caffeinate pid {awake.get('pid')}{since})"]  # fmt: skip
    if awake.get("error"):
        return [f"cannot keep the system awake: {awake['error']}"]
    return []
