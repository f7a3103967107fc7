"""How much mlx_lm.server's prompt caches may hold, and so what an MLX model needs.

mlx_lm.server keeps up to `--prompt-cache-size` KV caches (10 by default) and, without
`--prompt-cache-bytes`, however many bytes they take: its memory grows over a long run.
Unless the config sets a limit, llamad passes one: an eighth of what the machine can give
its models (Metal's working set on a Mac, else the RAM). The model's estimate is its
weights plus that limit; once it runs, its measured footprint, which follows the caches
as they grow, replaces the estimate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import psutil

from llamad.backends.devices.metal import apple_silicon, working_set

FLAG = "--prompt-cache-bytes"
SHARE = 8  # of the working set: room for the caches of a few long conversations
# mlx_lm.utils._parse_size's grammar: a decimal number, then nothing, M, G, MB or GB.
_SIZE = re.compile(r"^(\d+(?:\.\d*)?)\s*(M|G|MB|GB)?$", re.IGNORECASE)
_UNITS = {"": 1, "M": 10**6, "G": 10**9, "MB": 10**6, "GB": 10**9}


def parse_size(text: str) -> int | None:
    """Bytes in `--prompt-cache-bytes`'s value as mlx_lm reads it ("4G", "500MB",
    "1000000"), or None when it would refuse it."""
    match = _SIZE.match(text.strip())
    if match is None:
        return None
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").upper()])


def default_limit(total: int, apple: bool) -> int:
    """The limit llamad sets on a machine with `total` bytes of RAM."""
    return (working_set(total, None, apple) or total) // SHARE


def machine_default() -> int:
    """`default_limit` on this machine."""
    return default_limit(int(psutil.virtual_memory().total), apple_silicon())


def limit_in(args: Sequence[str]) -> int | None:
    """The limit an argv sets (`--prompt-cache-bytes N` or `=N`), or None."""
    for i, arg in enumerate(args):
        if arg == FLAG and i + 1 < len(args):
            return parse_size(args[i + 1])
        if arg.startswith(FLAG + "="):
            return parse_size(arg.split("=", 1)[1])
    return None


def has_limit(args: Sequence[str]) -> bool:
    """Whether an argv sets the limit at all (well formed or not)."""
    return any(a == FLAG or a.startswith(FLAG + "=") for a in args)
