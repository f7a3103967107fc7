"""`llamactl top`: the gateway's models live, like `htop` for models.

Standard library only (termios, select), as every llamactl command: it redraws the
status document every `--interval` seconds on the terminal's alternate screen, quits on
`q` or Ctrl-C, and prints one snapshot when `--once` is given or stdout is not a terminal.
"""

from __future__ import annotations

import os
import sys

from llamad.cli import exits
from llamad.cli.cells import duration, grid, size
from llamad.cli.gateway_lines import progress

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

COLUMNS = (
    "MODEL",
    "STATE",
    "IN-FLIGHT",
    "QUEUED",
    "REQ/MIN",
    "TOK/S",
    "TTFT-P50",
    "MEM",
    "IDLE-IN",
)
KEY_COLUMNS = ("KEY", "REQUESTS", "ERRORS", "PROMPT", "COMPLETION")
_ENTER, _LEAVE = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"
_HOME = "\x1b[H\x1b[J"


def _num(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _state(inst: dict[str, Any]) -> str:
    p = (inst.get("gateway") or {}).get("load_progress")
    if not p:
        return str(inst.get("state", "?"))
    fraction = p.get("fraction")
    return "loading" if fraction is None else f"loading {fraction:.0%}"


def _row(inst: dict[str, Any]) -> list[str]:
    g = inst.get("gateway") or {}
    left = g.get("idle_left_s")
    ttft = g.get("ttft_p50_s")
    return [
        str(inst.get("name")),
        _state(inst),
        str(g.get("in_flight", 0)),
        str(g.get("queued", 0)),
        str(g.get("requests_per_min", 0)),
        _num(g.get("tokens_per_s")),
        "-" if ttft is None else f"{ttft * 1000:.0f}ms",
        size(g.get("footprint_bytes") or g.get("estimate_bytes")),
        "-" if left is None else duration(left),
    ]


def memory_bar(gw: dict[str, Any], width: int = 30) -> str:
    """`[#######-------] used 3.1G of 24G, left 21G` (or the used total without a budget)."""
    used, budget = gw.get("used_bytes") or 0, gw.get("budget_bytes")
    if not budget:
        return f"memory: models hold {size(used)} (no budget)"
    filled = min(width, round(width * used / budget))
    bar = "#" * filled + "-" * (width - filled)
    return f"memory [{bar}] used {size(used)} of {size(budget)}, left {size(gw.get('left_bytes'))}"


def render(doc: dict[str, Any], colour: bool = False) -> str:
    """One screen of `top` from a status document."""
    gw = doc.get("gateway")
    daemon = doc.get("daemon") or {}
    head = f"llamad {daemon.get('version', '?')} (pid {daemon.get('pid', '?')})"
    if not gw:
        return f"{head}: no gateway ([gateway] listen is not set)"
    routed = [i for i in doc.get("instances") or [] if i.get("gateway")]
    lines = [f"{head}, gateway on {gw.get('listen')}", memory_bar(gw), ""]
    rows = [list(COLUMNS)] + [_row(i) for i in routed]
    lines += grid(rows, 1, colour)
    lines += [
        f"{i.get('name')}: {progress(p)}"
        for i in routed
        if (p := i["gateway"].get("load_progress"))
    ]
    keys = gw.get("keys") or {}
    if keys:
        key_rows = [list(KEY_COLUMNS)]
        for name, u in keys.items():
            counts = (
                u.get("requests"),
                u.get("errors"),
                u.get("prompt_tokens"),
                u.get("completion_tokens"),
            )
            key_rows.append(["(no key)" if name == "-" else name, *map(str, counts)])
        lines += ["", *grid(key_rows, 0)]
    return "\n".join(lines)


def top(args: argparse.Namespace) -> int:
    """`llamactl top [--once] [--interval S]`."""
    from llamad.cli.commands import client_for

    client = client_for(args, timeout=5.0)
    tty = sys.stdout.isatty() and sys.stdin.isatty()
    if args.once or not tty:
        print(render(client.call("GET", "/v1/status"), colour=_colour()))
        return exits.OK
    # A redraw costs the daemon a status document: no faster than ten a second.
    interval = max(0.1, args.interval)
    return _live(lambda: render(client.call("GET", "/v1/status"), colour=_colour()), interval)


def _colour() -> bool:
    from llamad.cli.table import use_colour

    return use_colour(sys.stdout)


def _live(screen: Any, interval: float) -> int:
    import select
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    out = sys.stdout
    try:
        tty.setcbreak(fd)
        out.write(_ENTER)
        while True:
            out.write(_HOME + screen() + "\n\n(q to quit)")
            out.flush()
            ready, _, _ = select.select([fd], [], [], interval)
            if ready and os.read(fd, 32).lower().startswith(b"q"):
                return exits.OK
    except KeyboardInterrupt:
        return exits.OK
    finally:
        out.write(_LEAVE)
        out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
