"""The gateway's slots by model name, the wake-ups of those who wait on them, and the
background stops and loads they run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission import Slot
from llamad.gateway.metrics import GatewayMetrics
from llamad.gateway.notes import Notes
from llamad.gateway.port import GatewayError
from llamad.gateway.view import SupervisorView

log = structlog.get_logger("llamad.gateway")

POLL_S = 0.25  # a wait for room also looks again this often (memory frees outside us)


class Slots:
    """The slots by model name, and a way to wake whoever waits on them."""

    def __init__(
        self,
        supervisor: SupervisorView,
        settings: Callable[[], GatewayConfig],
        metrics: GatewayMetrics | None = None,
        notes: Notes | None = None,
    ) -> None:
        self.sup = supervisor
        self.notes = notes or Notes()
        self.settings = settings
        self.metrics = metrics or GatewayMetrics()
        self.slots: dict[str, Slot] = {}
        self._room = asyncio.Lock()
        self._changed: asyncio.Event | None = None  # made when someone waits
        self._tasks: set[asyncio.Task[Any]] = set()

    def slot(self, name: str) -> Slot:
        """The slot of `name`, made on first use. A request keeps the slot it was
        admitted to; it never looks its slot up again by name."""
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = Slot(name)
        return slot

    def forget(self, name: str) -> None:
        """Drop the slot of a model a reload removed; leases on it still release it."""
        self.slots.pop(name, None)

    def poke(self) -> None:
        """Something that frees room or ends a wait happened: wake whoever waits."""
        # Every request's release pokes, and almost none finds anybody waiting.
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def next_poke(self) -> asyncio.Event:
        """The event the next poke sets."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    async def changed(self, timeout: float = POLL_S) -> None:
        """Wait for the next poke, at most `timeout` seconds."""
        waiter = asyncio.ensure_future(self.next_poke().wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()

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

    def counts(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) by model, for the gauges and the status document."""
        return {n: (s.in_flight, s.waiting) for n, s in self.slots.items()}

    async def close(self) -> None:
        """Cancel loads and stops under way (shutdown)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
