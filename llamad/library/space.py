"""Disk space for a pull: checked before a download starts, and a disk that fills up
midway (another program wrote to it meanwhile, or a quota was reached) said in one line,
with the partial file removed: on a full disk, keeping it to resume only blocks the rest."""

from __future__ import annotations

import contextlib
import errno
import shutil
from pathlib import Path

from llamad.library.progress import PullError

_FULL = (errno.ENOSPC, errno.EDQUOT)


def check_space(where: Path, need: int) -> None:
    """PullError when the file system holding `where` (or its nearest existing parent)
    has fewer than `need` bytes free."""
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need > free:
        raise PullError(f"not enough disk space in {where}: {need} bytes needed, {free} free")


def is_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in _FULL


def disk_full(what: str, where: Path, partial: Path | None = None) -> PullError:
    """The one line for a download the disk stopped; `partial` is deleted first."""
    if partial is not None:
        with contextlib.suppress(OSError):
            partial.unlink()
    return PullError(
        f"{what}: the disk filled up during the download (no space left in {where}); "
        "nothing of it was kept: free some space and pull again"
    )
