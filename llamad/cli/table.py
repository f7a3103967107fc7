"""Text for people: the status table, humanised numbers, command outcomes, reports."""

from __future__ import annotations

import os

from llamad.common import colour

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

COLUMNS = ("NAME", "STATE", "PID", "PORT", "MODEL", "UPTIME", "RESTARTS", "HEALTH", "RSS")
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


def use_colour(stream: TextIO) -> bool:
    """Colour for a terminal; NO_COLOR turns it off, FORCE_COLOR on (common.colour)."""
    return colour.use_colour(stream)


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


def health(h: dict[str, Any] | None) -> str:
    """`ok 1.2ms`, a failing HTTP status like `503`, `down` when nothing answered, else `-`."""
    if not h:
        return "-"
    if h.get("ok"):
        latency = h.get("latency_ms")
        return "ok" if latency is None else f"ok {latency:.1f}ms"
    return str(h["status"]) if h.get("status") is not None else "down"


def problem(inst: dict[str, Any]) -> str | None:
    """Why an instance is not running, in one line: its error, else how it last exited."""
    if inst.get("error"):
        return str(inst["error"])
    last = inst.get("last_exit")
    if not last:
        return None
    if last.get("signal"):
        text = f"killed by {last['signal']}"
    else:
        text = f"exited with code {last.get('code')}"
    tail = [line for line in last.get("stderr_tail") or [] if line.strip()]
    return f"{text}: {tail[-1].strip()}" if tail else text


def fine(inst: dict[str, Any]) -> bool:
    """Running, idle, or an on-demand instance waiting for its first request."""
    state = inst.get("state")
    on_demand = (inst.get("gateway") or {}).get("on_demand")
    return state in ("running", "idle") or (state == "stopped" and bool(on_demand))


def row(inst: dict[str, Any]) -> list[str]:
    """An instance's cells under COLUMNS."""
    model = inst.get("model")
    return [
        str(inst.get("name", "?")),
        str(inst.get("state", "?")),
        "-" if inst.get("pid") is None else str(inst["pid"]),
        "-" if inst.get("port") is None else str(inst["port"]),
        "-" if not model else os.path.basename(str(model)),
        duration(inst.get("uptime_s")),
        str(inst.get("restarts", 0)),
        health(inst.get("health")),
        size(inst.get("rss_bytes")),
    ]


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


def render(doc: dict[str, Any], colour: bool = False) -> str:
    """The status table, then a warning for a config error and a line per troubled instance."""
    instances = doc.get("instances") or []
    lines = grid([list(COLUMNS)] + [row(inst) for inst in instances], 1, colour)
    if not instances:
        lines.append("(no instances configured)")
    error = (doc.get("daemon") or {}).get("config_error")
    if error:
        lines.append(f"warning: config not applied: {error}")
    lines += gateway_lines(doc)
    for inst in instances:
        why = problem(inst) if not fine(inst) else None
        if why:
            lines.append(f"{inst.get('name')}: {why}")
    for inst in instances:
        group = inst.get("rpc")
        if group:
            flag = " (degraded: a worker is not running)" if group.get("degraded") else ""
            workers = ", ".join(group.get("workers") or [])
            lines.append(f"{inst.get('name')}: rpc group with {workers}{flag}")
    return "\n".join(lines)


GATEWAY_COLUMNS = ("MODEL", "ALIASES", "ON-DEMAND", "IN-FLIGHT", "QUEUED", "IDLE-IN", "EST", "USED")


def gateway_lines(doc: dict[str, Any]) -> list[str]:
    """The gateway's view: a row per routable model, then the memory budget."""
    gw = doc.get("gateway")
    if not gw:
        return []
    rows = [list(GATEWAY_COLUMNS)]
    for inst in doc.get("instances") or []:
        g = inst.get("gateway")
        if not g:
            continue
        left = g.get("idle_left_s")
        rows.append(
            [
                str(inst.get("name")),
                ",".join(g.get("aliases") or []) or "-",
                "yes" if g.get("on_demand") else "no",
                str(g.get("in_flight", 0)),
                str(g.get("queued", 0)),
                duration(left) if left is not None else "-",
                size(g.get("estimate_bytes")),
                size(g.get("footprint_bytes")),
            ]
        )
    budget = gw.get("budget_bytes")
    limit = f", at most {gw['max_loaded']} on demand" if gw.get("max_loaded") else ""
    memory = (
        "no memory budget"
        if budget is None
        else (
            f"memory budget {size(budget)} ({gw.get('memory_budget')}), "
            f"used {size(gw.get('used_bytes'))}, left {size(gw.get('left_bytes'))}"
        )
    )
    loading = [
        f"{inst.get('name')}: {progress(p)}"
        for inst in doc.get("instances") or []
        if (p := (inst.get("gateway") or {}).get("load_progress"))
    ]
    return ["", f"gateway on {gw.get('listen')}: {memory}{limit}", *grid(rows, 2), *loading]


def progress(p: dict[str, Any]) -> str:
    """A load's progress: `loading 42% (3s of ~7s)`, or how long it has been going."""
    elapsed, expected, fraction = p.get("elapsed_s"), p.get("expected_s"), p.get("fraction")
    if fraction is None or expected is None:
        return f"loading for {elapsed:.1f}s (no earlier load to estimate from)"
    return f"loading {fraction:.0%} ({elapsed:.1f}s of ~{expected:.1f}s, from {p.get('basis')})"


def outcome(verb: str, doc: dict[str, Any]) -> tuple[bool, str] | None:
    """(succeeded, line) once `verb` has played out on the instance `doc`; None if it has not.

    llamad answers a waited-for command only once the instance left the state it was in,
    so start and restart aim at running; stop at stopped, which a failed instance also
    satisfies: it has no process either.
    """
    name, state, pid = doc.get("name"), doc.get("state"), doc.get("pid")
    if verb == "stop" and state in ("stopped", "failed"):
        return True, f"{name}: {state}" + (" (not running)" if state == "failed" else "")
    if verb != "stop" and state == "running":
        return True, f"{name}: running (pid {pid})"
    if verb != "stop" and state == "failed":
        return False, f"{name}: failed: {problem(doc) or 'no error recorded'}"
    return None


def timed_out(doc: dict[str, Any]) -> str:
    """The line for an instance that did not get there in time."""
    why = problem(doc)
    return f"{doc.get('name')}: timed out in state {doc.get('state')}" + (f": {why}" if why else "")


def reload_lines(report: dict[str, Any]) -> list[str]:
    """`added: a, b` for each non-empty kind of change, or `no changes`."""
    kinds = ("added", "changed", "removed", "unchanged")
    lines = [f"{kind}: {', '.join(report[kind])}" for kind in kinds if report.get(kind)]
    if not any(report.get(kind) for kind in kinds[:3]):
        lines.insert(0, "no changes")
    return lines
