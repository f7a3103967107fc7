"""Whether a save has room on the disk: the free space must stay above a floor once the
save is written, not only before it (a slot of a big model at a long context is
gigabytes, and a disk filled even for a moment fails whoever else writes to it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from llamad.supervise import slot_files as files

# Below this much free space nothing is saved: a cache never fills the disk.
MIN_FREE = 512 * 1024**2


def no_room(directory: Path, need: int = 0) -> str | None:
    """Make `directory` if need be; why a save of about `need` bytes cannot go there
    now, or None."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        return f"cannot use {directory}: {exc.strerror}"
    if free - need >= MIN_FREE:
        return None
    return "disk full" if need == 0 else f"disk full: {free} bytes free for about {need}"


def need(directory: Path, tokens: Iterable[int]) -> int:
    """About how many bytes slots holding `tokens` take once saved: at the most bytes
    per token this instance's saved files show (0 before its first save)."""
    per_token = max(
        (s.bytes / s.tokens for s in files.saved(directory) if s.tokens > 0), default=0.0
    )
    return int(per_token * sum(tokens))
