"""Turn a TOML value into the string llama-server will read from its environment.

Kept apart from `catalog.py` (which re-exports `render`) so the parsing and caching
code stays short. The rules mirror how llama.cpp's `common/arg.cpp` reads env values.
"""

from __future__ import annotations

import math
import os
from decimal import Decimal
from typing import TypeAlias

from llamad.backends.options import Lookup

TomlScalar: TypeAlias = str | int | float | bool
"""A scalar as tomllib returns it (dates are not llama-server values)."""

# llama.cpp compares env booleans case-sensitively against exactly these words. We accept
# any case from the TOML file but always emit the canonical lower-case spelling.
TRUTHY = frozenset({"on", "enabled", "true", "1"})
FALSY = frozenset({"off", "disabled", "false", "0"})


def render(lookup: Lookup, value: TomlScalar | list[TomlScalar]) -> str | None:
    """Render `value` for `lookup.env`; None means "leave the variable unset".

    Raises ValueError (a short message without file/key context) when the value cannot
    mean anything for this option, e.g. `ctx_size = true`.
    """
    option = lookup.option
    if option.value is None:
        # A flag without a value: the env var is read as a boolean.
        if isinstance(value, list):
            raise ValueError("expects true or false, not a list")
        on = _as_bool(value) != lookup.invert
        if option.negatable:
            # A --x/--no-x pair reads "false" as --no-x, so both values are meaningful.
            return "true" if on else "false"
        # A lone flag fires only when truthy; there is no way to say "off" but absence.
        return "true" if on else None
    if isinstance(value, list):
        return ",".join(_render_valued(option.value, item) for item in value)
    return _render_valued(option.value, value)


def _as_bool(value: TomlScalar) -> bool:
    """Read a boolean the way llama.cpp would, plus TOML's own true/false and 0/1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUTHY:
            return True
        if word in FALSY:
            return False
    raise ValueError(f"expects true or false, not {value!r}")


def _render_valued(hint: str, value: TomlScalar) -> str:
    """Render one value for an option that takes an argument described by `hint`."""
    if isinstance(value, bool):  # before int: bool is an int subclass
        if "on|off" in hint:
            return "on" if value else "off"
        if "0|1" in hint:
            return "1" if value else "0"
        raise ValueError(f"expects a value like {hint}, not true/false")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _render_float(value)
    if isinstance(value, str):
        # Only a leading "~" is a home directory; "~" elsewhere (e.g. in a template) is text.
        if value == "~" or value.startswith("~/"):
            return os.path.expanduser(value)
        return value
    raise ValueError(f"expects a string, number or boolean, not {type(value).__name__}")


def _render_float(value: float) -> str:
    """Shortest round-tripping text, written out positionally: 1e-05 -> "0.00001"."""
    text = repr(value)
    if not math.isfinite(value) or "e" not in text:
        return text
    # repr switches to exponent notation for tiny/huge values; positional digits parse in
    # every strtof/stoi path llama.cpp uses and read better in `llamactl` output.
    return format(Decimal(text), "f")
