"""Cells for people: durations and sizes as `ps` and `top` show them, and aligned
columns with the state column coloured."""

from __future__ import annotations

_GREEN, _YELLOW, _RED, _RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"
STATE_COLOURS = {
    "running": _GREEN,
    "starting": _YELLOW,
    "stopping": _YELLOW,
    "backoff": _RED,
    "failed": _RED,
    "idle": _GREEN,  # stopped by the gateway for want of requests: fine
    "unreachable": _RED,  # a whole host, in `llamactl fleet status`
    "error": _RED,  # ... or one that answered but refused the token
}


def grid(rows: list[list[str]], state_col: int = 1, colour: bool = False) -> list[str]:
    """Aligned lines of `rows` (the first is the header), the state column coloured."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for index, cells in enumerate(rows):
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=True)]
        # Pad before colouring: escape codes have no width on screen but do in len().
        state = cells[state_col]
        if colour and index > 0 and state in STATE_COLOURS:
            padded[state_col] = f"{STATE_COLOURS[state]}{padded[state_col]}{_RESET}"
        lines.append("  ".join(padded).rstrip())
    return lines


def duration(seconds: float | None) -> str:
    """12s, 3m12s, 2h05m, 4d03h: two units at most, the larger first."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def size(n: int | None) -> str:
    """Binary units like `ps`/`top`: 820K, 612M, 1.2G."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "K", "M", "G"):
        if value < 1024:
            return f"{value:.1f}{unit}" if unit == "G" and value < 10 else f"{value:.0f}{unit}"
        value /= 1024
    return f"{value:.1f}T" if value < 10 else f"{value:.0f}T"
