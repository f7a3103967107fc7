"""Text for people: the status table, a row per instance and why one is in trouble."""

from __future__ import annotations

import os

from llamad.cli.awake_line import awake_lines
from llamad.cli.cells import duration, grid, size
from llamad.cli.gateway_lines import gateway_lines
from llamad.cli.listener_lines import listener_lines
from llamad.common import colour

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

COLUMNS = ("NAME", "STATE", "PID", "PORT", "MODEL", "UPTIME", "RESTARTS", "HEALTH", "RSS")


def use_colour(stream: TextIO) -> bool:
    """Colour for a terminal; NO_COLOR turns it off, FORCE_COLOR on (common.colour)."""
    return colour.use_colour(stream)


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


def executables(doc: dict[str, Any]) -> list[str]:
    """What runs: `llama-server: /usr/local/bin/llama serve, version 1 (571d0d5)` for each
    kind, and each instance that names its own executable."""
    lines = []
    for kind, tool in ((doc.get("daemon") or {}).get("backends") or {}).items():
        version = str(tool.get("version") or "unknown").removeprefix("version: ")
        lines.append(f"{kind}: {tool.get('command') or tool.get('path')}, version {version}")
    instances = doc.get("instances") or []
    lines += [f"{i.get('name')}: runs {i['command']}" for i in instances if i.get("command")]
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
    lines += executables(doc)
    lines += listener_lines(doc)
    lines += awake_lines(doc)
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
