"""Taking the running models' footprints off the event loop, within a deadline.

A reading can block: psutil #2885 has one that never returns on a headless macOS 15.
A thread cannot be killed, so the readings run one batch at a time in a daemon thread
of their own (never the loop's shared executor, which stuck threads would fill, and
never one that would hold up the daemon's exit); a batch that misses its deadline is
"no measurement", and while it is still stuck the next batch is not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping

import structlog

log = structlog.get_logger("llamad.gateway")

DEADLINE_S = 2.0  # a batch of footprints takes milliseconds; seconds mean it is stuck

Sizes = dict[str, int | None]


class Measurer:
    """Runs `read(pid)` for a batch of models in one thread, bounded by `deadline`."""

    def __init__(
        self, read: Callable[[int | None], int | None], deadline: float = DEADLINE_S
    ) -> None:
        self._read, self.deadline = read, deadline
        self._thread: threading.Thread | None = None
        self._said = False  # the stall is logged once until readings come back

    async def sizes(self, pids: Mapping[str, int | None]) -> Sizes:
        """Each model's footprint by name; empty when the readings did not come in time
        (or an earlier batch is still stuck)."""
        if not pids:
            return {}
        if self._thread is not None and self._thread.is_alive():
            return {}  # the last batch is stuck: no second thread behind it
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Sizes] = loop.create_future()
        batch = dict(pids)

        def run() -> None:
            try:
                sizes = {name: self._read(pid) for name, pid in batch.items()}
            except Exception:  # a bug in a reader: logged, and no measurement this time
                log.exception("gateway.footprints_failed")
                sizes = {}
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, done, sizes)

        self._thread = threading.Thread(target=run, name="llamad-footprints", daemon=True)
        self._thread.start()
        try:
            async with asyncio.timeout(self.deadline):
                sizes = await asyncio.shield(done)
        except TimeoutError:
            if not self._said:
                log.warning("gateway.footprints_stalled", deadline_s=self.deadline)
                self._said = True
            return {}
        self._said = False
        return sizes


def _settle(done: asyncio.Future[Sizes], sizes: Sizes) -> None:
    if not done.done():
        done.set_result(sizes)
