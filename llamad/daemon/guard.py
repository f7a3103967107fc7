"""The daemon's services run guarded: a failing one never takes the instances down with it.

A bare TaskGroup cancels every sibling when one task raises, which SIGKILLs every child
with no SIGTERM and ends the daemon with a traceback. Here a failed service is logged;
one that can simply run again (the watcher, the TCP listener) is retried with backoff,
and one the daemon cannot do without (the control socket) ends the daemon gracefully:
instances get their stop, and the exit code tells launchd or systemd to restart it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

log = structlog.get_logger("llamad.daemon")

RETRY_INITIAL_S, RETRY_MAX_S = 1.0, 30.0

Service = Callable[[], Coroutine[Any, Any, None]]


class ServiceGuard:
    """Starts services in `group`; `failed` names the one that ended the daemon, if any."""

    def __init__(
        self, group: asyncio.TaskGroup, stop: asyncio.Event, shutdown: asyncio.Event
    ) -> None:
        self._group, self._stop, self._shutdown = group, stop, shutdown
        self.failed: str | None = None

    def start(self, name: str, service: Service, *, retry: bool) -> asyncio.Task[None]:
        """Run `service()` as task `name`: again after a failure if `retry`, else a failure
        asks for a graceful shutdown of the daemon."""
        return self._group.create_task(self._run(name, service, retry), name=name)

    async def _run(self, name: str, service: Service, retry: bool) -> None:
        delay = RETRY_INITIAL_S
        while True:
            try:
                await service()
                return
            except Exception as exc:  # a service's bug or fault must not kill the children
                log.error(
                    "daemon.service_failed",
                    service=name,
                    error=_describe(exc),
                    retry_in_s=delay if retry else None,
                    exc_info=exc,
                )
            if not retry:
                self.failed = self.failed or name
                self._shutdown.set()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=delay)
            if self._stop.is_set():
                return
            delay = min(delay * 2, RETRY_MAX_S)


def _describe(exc: BaseException) -> str:
    """`Type: message`, of the errors inside an exception group rather than the group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
