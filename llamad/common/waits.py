"""Waiting on several asyncio events at once."""

from __future__ import annotations

import asyncio


async def first_of(*events: asyncio.Event) -> None:
    """Wait until one of `events` is set; the waits on the others end with it."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
