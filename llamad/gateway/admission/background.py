"""The admission's background tasks: loads and stops run beside the requests that wait
for them, each watched (a failure is logged) and cancelled at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import structlog

from llamad.gateway.contract.port import GatewayError

log = structlog.get_logger("llamad.gateway")


class Background:
    """The tasks under way, and how each one ends."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `coro` in the background, watched: a failure is logged, and `close()`
        cancels what is still running."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        exc = None if task.cancelled() else task.exception()
        # A load's refusal reaches its waiters through the task; anything else is a bug.
        if exc is not None and not isinstance(exc, GatewayError):
            log.error("gateway.task_failed", task=task.get_name(), exc_info=exc)

    async def close(self) -> None:
        """Cancel what is under way (shutdown)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
