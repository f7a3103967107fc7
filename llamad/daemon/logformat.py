"""Which format the daemon logs in, decided before the daemon itself is imported.

JSON lines need neither rich nor colorama, which `structlog.dev` imports for console
tracebacks and colours whenever they are installed (the test extras and the docs' tools
pull them in), nor httpx's command-line client (its optional `cli` extra: click, pygments
and rich again): together about a sixth of a cold start's imports.
Marking them absent makes those imports fail at once, and both libraries then fall back
exactly as they do where the modules are not installed.
"""

from __future__ import annotations

import sys
from typing import Literal, TextIO

Format = Literal["console", "json"]

# Only console output uses these; nothing else in the daemon imports them.
CONSOLE_ONLY = ("rich", "colorama", "click", "pygments")


def resolve(fmt: str, stream: TextIO) -> Format:
    """`auto` is console on a terminal and JSON lines otherwise (a service's log file)."""
    if fmt == "auto":
        return "console" if stream.isatty() else "json"
    return "console" if fmt == "console" else "json"


def keep_out_console_only() -> None:
    """Make importing the console-only modules fail for the rest of this process, unless
    something imported them already (then they are in use and stay)."""
    for name in CONSOLE_ONLY:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
