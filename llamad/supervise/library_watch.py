"""Watching the library's folders: a model file, manifest or snapshot that appears,
changes or goes asks for a reload, which rescans and applies only the difference.

Files still being written (`*.incomplete`, `*-partial`, hidden temporaries) are not news;
a file copied in place under its final name is rescanned until it is complete (the
library lists it as incomplete meanwhile, and never serves it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import structlog
import watchfiles

from llamad.library.walk import is_partial

log = structlog.get_logger("llamad.library")

DEBOUNCE_MS = 300
# How often folders that do not exist yet (or went away) are looked for again.
RECHECK_S = 5.0


def _relevant(_change: watchfiles.Change, path: str) -> bool:
    return not is_partial(Path(path).name)


def _existing(places: list[Path]) -> list[str]:
    return sorted({str(p) for p in places if p.is_dir()})


async def watch_library(
    places: Callable[[], list[Path]], changed: Callable[[], None], stop: asyncio.Event
) -> None:
    """Call `changed` after each burst of changes under `places()` until `stop` is set."""
    while not stop.is_set():
        dirs = _existing(places())
        if not dirs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RECHECK_S)
            continue
        try:
            async for changes in watchfiles.awatch(
                *dirs,
                watch_filter=_relevant,
                debounce=DEBOUNCE_MS,
                step=50,
                stop_event=stop,
                recursive=True,
                rust_timeout=int(RECHECK_S * 1000),
                yield_on_timeout=True,
            ):
                if changes:
                    changed()
                if _existing(places()) != dirs:
                    changed()  # a folder came or went: rescan, then watch the new set
                    break
        except (OSError, RuntimeError) as exc:  # a folder removed under the watch, a loop
            log.warning("library.watch_failed", dirs=dirs, error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RECHECK_S)
