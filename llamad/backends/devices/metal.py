"""What Metal lets a Mac's processes wire: its working set.

llama-server's device list gives the Metal device's size (`recommendedMaxWorkingSetSize`,
raised by `sysctl iogpu.wired_limit_mb`); without a list, Apple silicon's default share of
the RAM stands in for it.
"""

from __future__ import annotations

import platform

GiB = 1024**3


def apple_silicon() -> bool:
    """Whether this is a Mac with Apple silicon (unified memory, Metal)."""
    return platform.system() == "Darwin" and platform.machine() == "arm64"


def working_set(total: int, listed: int | None, apple: bool) -> int | None:
    """What Metal lets our models wire together, or None (no such limit): the size
    llama-server's device list reports (`listed`), else on Apple silicon (`apple`) the
    default share of the RAM (`total`)."""
    if listed is not None:
        return listed
    if not apple:
        return None
    # recommendedMaxWorkingSetSize is 2/3 of RAM up to 36 GiB and 3/4 above.
    return int(total * (2 / 3 if total <= 36 * GiB else 3 / 4))
