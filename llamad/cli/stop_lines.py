"""The gateway's last stops under `llamactl status`: which model went, when, and why
(the status document's `gateway.recent_stops`)."""

from __future__ import annotations

import time

from llamad.cli.cells import duration

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CAUSES = {
    "memory": "evicted: not enough memory for {for_model}",
    "max_loaded": "evicted: max_loaded reached, room for {for_model}",
    "exclusive": "evicted: {for_model} is in exclusive set {set} with it",
    "group": "stopped with its group {set}",
    "idle_timeout": "idle timeout",
    "unload": "unloaded on request (unload, or a client's keep_alive 0)",
}


def why(stop: dict[str, Any]) -> str:
    """One stop's cause in words: `evicted: not enough memory for b`."""
    cause = str(stop.get("cause") or stop.get("reason"))
    line = CAUSES.get(cause, cause).format(
        for_model=stop.get("for_model") or "?", set=stop.get("set") or "?"
    )
    if cause == "group" and stop.get("for_model"):
        line += f", for {stop['for_model']}"
    return line


def stop_lines(doc: dict[str, Any], now: float | None = None) -> list[str]:
    """`recent stops:` then one line per stop, newest first; nothing when none."""
    stops = (doc.get("gateway") or {}).get("recent_stops") or []
    if not stops:
        return []
    now = time.time() if now is None else now
    width = max(len(str(s.get("model"))) for s in stops)
    lines = ["recent stops:"]
    for s in stops:
        ago = duration(now - s["at"]) if s.get("at") else "-"
        lines.append(f"  {s.get('model')!s:<{width}}  {ago:>6} ago  {why(s)}")
    return lines
