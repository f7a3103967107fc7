"""Waiting for the first of several things to happen."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def first_of(*waits: Coroutine[Any, Any, object]) -> int:
    """Run `waits` side by side until one ends; return its index (the lowest, when several
    end in the same step). The others are cancelled, and have ended when this returns.

    An exception the first raised is raised here. When the caller is cancelled, every
    wait is cancelled and awaited, and the cancellation goes on.

    Each wait is owned here, which is why only coroutines are taken: to wait for a task
    someone else owns without cancelling it, pass `asyncio.wait([task])`.
    """
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        # Nothing of the losers outlives the wait: a cancelled wait that still holds a
        # resource (a lock, a queue place) has given it back before the caller goes on.
        await asyncio.wait(tasks)
    first = next(i for i, task in enumerate(tasks) if task in done)
    tasks[first].result()
    return first
