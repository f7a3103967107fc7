"""The daemon's services run guarded: a failing one never takes the instances down with it.

A bare TaskGroup cancels every sibling when one task raises, which SIGKILLs every child
with no SIGTERM and ends the daemon with a traceback. Here a failed service is logged;
one that can simply run again (the watcher, the TCP listener) is retried with backoff,
and one the daemon cannot do without (the control socket) ends the daemon gracefully:
instances get their stop, and the exit code tells launchd or systemd to restart it.
"""

from __future__ import annotations

import asyncio

from llamad.common.retrying import Service, run_retrying


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
        failure = await run_retrying(name, service, self._stop, retry=retry)
        if failure is not None:
            self.failed = self.failed or name
            self._shutdown.set()
