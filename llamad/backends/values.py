"""Small checks on config values that more than one backend needs."""

from __future__ import annotations

from llamad.backends.base import Problem


def port_number(text: object, problem: Problem) -> int:
    """A TCP port from a key's value (an int, or the digits of a rendered setting)."""
    if isinstance(text, bool) or text is None or text == "":
        problem(("port",), "is required: a TCP port from 1 to 65535")
        return 0
    raw = str(text)
    # ASCII digits only: str.isdigit() accepts fullwidth and superscript digits.
    port = int(raw) if raw.isascii() and raw.isdigit() else 0
    if not 0 < port < 65536:
        problem(("port",), f"must be a TCP port from 1 to 65535 (got {text!r})")
    return port


def is_number(text: str) -> bool:
    """Whether an `args` entry is a (negative) number rather than a flag."""
    try:
        float(text)
    except ValueError:
        return False
    return True
