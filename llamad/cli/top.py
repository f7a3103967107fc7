"""`llamactl top`: the gateway's models live, like `htop` for models.

Drawn with rich: a `Live` display on the terminal's alternate screen, redrawn from the
status document every `--interval` seconds. `q` or Ctrl-C quits and gives the terminal
back as it was. With `--once`, or when stdout is not a terminal, one snapshot is printed.
rich is imported by this command only: the others stay quick to start.
"""

from __future__ import annotations

import os
import sys

from llamad.cli import exits
from llamad.cli.cells import duration, size
from llamad.cli.gateway_lines import progress

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from rich.console import Console, RenderableType

COLUMNS = (
    "MODEL",
    "STATE",
    "IN-FLIGHT",
    "QUEUED",
    "REQ/MIN",
    "TOK/S",
    "TTFT-P50",
    "CACHED",
    "MEM",
    "IDLE-IN",
)
KEY_COLUMNS = ("KEY", "REQUESTS", "ERRORS", "PROMPT", "COMPLETION")
STATE_STYLES = {
    "running": "green",
    "idle": "green",  # stopped by the gateway for want of requests: fine
    "starting": "yellow",
    "stopping": "yellow",
    "backoff": "red",
    "failed": "red",
}
BAR_WIDTH = 30
SNAPSHOT_WIDTH = 160  # not a terminal and no COLUMNS: wide enough for every column


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
    hit = g.get("cache_hit_ratio")  # of the last minute's prompt tokens, from the cache
    return [
        str(inst.get("name")),
        _state(inst),
        str(g.get("in_flight", 0)),
        str(g.get("queued", 0)),
        str(g.get("requests_per_min", 0)),
        _num(g.get("tokens_per_s")),
        "-" if ttft is None else f"{ttft * 1000:.0f}ms",
        "-" if hit is None else f"{hit:.0%}",
        size(g.get("footprint_bytes") or g.get("estimate_bytes")),
        "-" if left is None else duration(left),
    ]


def memory_bar(gw: dict[str, Any]) -> RenderableType:
    """`memory [████████          ] used 3.1G of 24G, left 21G`, or the used total
    without a budget."""
    from rich.bar import Bar
    from rich.table import Table
    from rich.text import Text

    used, budget = gw.get("used_bytes") or 0, gw.get("budget_bytes")
    if not budget:
        return Text(f"memory: models hold {size(used)} (no budget)")
    # Solid blocks on blank: readable without colour too (a snapshot, a capture).
    bar = Bar(budget, 0, min(used, budget), width=BAR_WIDTH, color="cyan", bgcolor="grey23")
    line = Table.grid()
    line.add_column()
    line.add_column(width=BAR_WIDTH)
    left = size(gw.get("left_bytes"))
    line.add_row("memory [", bar, f"] used {size(used)} of {size(budget)}, left {left}")
    return line


def _table(header: tuple[str, ...], rows: list[list[str]], state: int | None) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in header:
        table.add_column(name, no_wrap=True)
    for row in rows:
        cells = [Text(c) for c in row]
        if state is not None:
            cells[state].stylize(STATE_STYLES.get(row[state].split()[0], ""))
        table.add_row(*cells)
    return table


def render(doc: dict[str, Any]) -> RenderableType:
    """One screen of `top` from a status document."""
    from rich.console import Group
    from rich.text import Text

    gw = doc.get("gateway")
    daemon = doc.get("daemon") or {}
    head = f"llamad {daemon.get('version', '?')} (pid {daemon.get('pid', '?')})"
    if not gw:
        return Text(f"{head}: no gateway ([gateway] listen is not set)")
    routed = [i for i in doc.get("instances") or [] if i.get("gateway")]
    parts: list[RenderableType] = [Text(f"{head}, gateway on {gw.get('listen')}"), memory_bar(gw)]
    parts += [Text(""), _table(COLUMNS, [_row(i) for i in routed], 1)]
    parts += [
        Text(f"{i.get('name')}: {progress(p)}")
        for i in routed
        if (p := i["gateway"].get("load_progress"))
    ]
    keys = gw.get("keys") or {}
    if keys:
        rows = [
            ["(no key)" if name == "-" else name]
            + [str(u.get(k)) for k in ("requests", "errors", "prompt_tokens", "completion_tokens")]
            for name, u in keys.items()
        ]
        parts += [Text(""), _table(KEY_COLUMNS, rows, None)]
    return Group(*parts)


def top(args: argparse.Namespace) -> int:
    """`llamactl top [--once] [--interval S]`."""
    from rich.console import Console

    from llamad.cli.commands import client_for

    client = client_for(args, timeout=5.0)
    tty = sys.stdout.isatty() and sys.stdin.isatty()
    if args.once or not tty:
        wide = tty or "COLUMNS" in os.environ
        console = Console(width=None if wide else SNAPSHOT_WIDTH)
        console.print(render(client.call("GET", "/v1/status")))
        return exits.OK
    # A redraw costs the daemon a status document: no faster than ten a second.
    interval = max(0.1, args.interval)
    return _live(Console(), lambda: render(client.call("GET", "/v1/status")), interval)


def _live(console: Console, screen: Callable[[], RenderableType], interval: float) -> int:
    import select
    import termios
    import tty

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)  # keys one by one, unechoed: `q` needs no Enter
        with Live(console=console, screen=True, auto_refresh=False) as live:
            while True:
                live.update(Group(screen(), Text("\n(q to quit)")), refresh=True)
                ready, _, _ = select.select([fd], [], [], interval)
                if ready and os.read(fd, 32).lower().startswith(b"q"):
                    return exits.OK
    except KeyboardInterrupt:
        return exits.OK
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
