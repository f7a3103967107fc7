"""Whether to write ANSI colour: the one rule for llamad's logs and llamactl's tables."""

from __future__ import annotations

import os

# llamactl imports this: typing slows its start, and annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO


def use_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """NO_COLOR (no-color.org) turns colour off, FORCE_COLOR on even for a pipe (CI logs,
    `less -R`); otherwise colour only for a terminal that is not TERM=dumb."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
