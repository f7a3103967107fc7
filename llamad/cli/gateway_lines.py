"""The gateway's part of `llamactl status`: a row per routable model, the memory budget
(RAM's, then each device's), the loads under way and the last stops with their causes."""

from __future__ import annotations

from llamad.cli.cells import duration, grid, size
from llamad.cli.set_lines import set_lines
from llamad.cli.stop_lines import stop_lines

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
    devices = [device_line(d) for d in gw.get("devices") or []]
    head = f"gateway on {gw.get('listen')}: {memory}{limit}"
    return ["", head, *devices, *grid(rows, 2), *set_lines(doc), *loading, *stop_lines(doc)]


def device_line(d: dict[str, Any]) -> str:
    """`CUDA0 (NVIDIA GeForce RTX 4090): budget 21G, used 12G, left 8.9G: a 12G, c 2G`."""
    budget = d.get("budget_bytes")
    room = (
        "no budget"
        if budget is None
        else f"budget {size(budget)}, used {size(d.get('used_bytes'))}, "
        f"left {size(d.get('left_bytes'))}"
    )
    models = ", ".join(f"{n} {size(b)}" for n, b in (d.get("models") or {}).items()) or "none"
    return f"  {d.get('name')} ({d.get('description')}): {room}; models: {models}"


def progress(p: dict[str, Any]) -> str:
    """A load's progress: `loading 42% (3s of ~7s)`, or how long it has been going."""
    elapsed, expected, fraction = p.get("elapsed_s"), p.get("expected_s"), p.get("fraction")
    if fraction is None or expected is None:
        return f"loading for {elapsed:.1f}s (no earlier load to estimate from)"
    return f"loading {fraction:.0%} ({elapsed:.1f}s of ~{expected:.1f}s, from {p.get('basis')})"
