"""The gateway's book-keeping per model, and the waits and background tasks around it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from llamad.config.gateway_table import Gateway as Settings
from llamad.gateway.metrics import GatewayMetrics
from llamad.supervise.supervisor import Supervisor

POLL_S = 0.25  # a wait for room also looks again this often (memory frees outside us)


@dataclass
class Slot:
    """What the gateway tracks for one model."""

    in_flight: int = 0
    waiting: int = 0
    last_used: float = 0.0  # monotonic
    keep_alive: float | None = None  # a request's override of idle_timeout
    expires: float | None = None  # monotonic time of the idle stop, when armed
    load: asyncio.Task[None] | None = None
    deciding: bool = False  # the load waits for room: cancelled when nobody waits
    stopping: bool = False  # being evicted, idle-stopped or drained: do not hand out
    measured: int | None = None  # its footprint when last seen running
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def busy(self) -> bool:
        """Requests in flight or waiting, or a load under way."""
        return bool(self.in_flight or self.waiting or self.load)


class Slots:
    """The slots by model name, and a way to wake whoever waits on them."""

    def __init__(
        self,
        supervisor: Supervisor,
        settings: Callable[[], Settings],
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.sup = supervisor
        self.settings = settings
        self.metrics = metrics or GatewayMetrics()
        self.slots: dict[str, Slot] = {}
        self._room = asyncio.Lock()
        self._changed = asyncio.Event()
        # Set by the idle timers: the last request of a model ended.
        self.after_last: Callable[[str], None] = lambda name: None

    def slot(self, name: str) -> Slot:
        """The slot of `name`, made on first use."""
        return self.slots.setdefault(name, Slot())

    def poke(self) -> None:
        """Something that frees room or ends a wait happened: wake whoever waits."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout: float = POLL_S) -> None:
        """Wait for the next poke, at most `timeout` seconds."""
        waiter = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()

    def spawn(self, slot: Slot, coro: object) -> None:
        """Run `coro` for `slot` in the background; close() cancels it."""
        task: asyncio.Task[None] = asyncio.create_task(coro)  # type: ignore[arg-type]
        slot.tasks.add(task)
        task.add_done_callback(slot.tasks.discard)

    def counts(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) by model, for the gauges and the status document."""
        return {n: (s.in_flight, s.waiting) for n, s in self.slots.items()}

    async def close(self) -> None:
        """Cancel loads and stops under way (shutdown)."""
        tasks = [t for s in self.slots.values() for t in (*s.tasks, s.load) if t is not None]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
