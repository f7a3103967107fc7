"""Admitting requests: hold each until its model serves, at most `max_queue` waiting.

One load serves every waiter of a model. A waiter that leaves takes its place in the
queue with it, and a load nobody waits for any more is cancelled before it evicts
anything.
"""

from __future__ import annotations

import asyncio
import time

from llamad.gateway.loads import Loads
from llamad.gateway.port import QueueFull, QueueTimeout, Unavailable
from llamad.gateway.slots import POLL_S, Slot
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts


class Scheduler(Loads):
    """Admits requests to models, loading them on demand."""

    async def ready(self, facts: Facts) -> None:
        """Return once `facts.name` serves requests: load it (on demand) or wait for it.

        Raises QueueFull, QueueTimeout, LoadFailed or Unavailable."""
        name, slot = facts.name, self.slot(facts.name)
        if facts.state is State.RUNNING and not slot.stopping:
            return
        cfg = self.settings()
        if slot.waiting >= cfg.max_queue:
            raise QueueFull(f"{slot.waiting} requests already wait for model {name!r}")
        slot.waiting += 1
        try:
            async with asyncio.timeout(cfg.queue_timeout):
                await self._until_running(name, slot)
        except TimeoutError:
            raise QueueTimeout(
                f"model {name!r} was not ready within {cfg.queue_timeout:g}s"
            ) from None
        finally:
            slot.waiting -= 1
            if not slot.waiting and slot.deciding and slot.load is not None:
                slot.load.cancel()  # nobody wants it any more: evict nothing for it

    async def _until_running(self, name: str, slot: Slot) -> None:
        while True:
            facts = self.sup.facts(name)
            if facts is None or facts.closing:
                raise Unavailable(f"model {name!r} is being removed")
            if facts.state is State.RUNNING and not slot.stopping:
                return
            if slot.stopping or facts.state is State.STOPPING:
                await self._changes(name, facts.state)
            elif facts.spec.on_demand:
                if slot.load is None:
                    slot.load = asyncio.create_task(self._load(name, slot), name=f"load-{name}")
                    slot.load.add_done_callback(_retrieve)
                load = slot.load
                try:
                    await asyncio.shield(load)
                except asyncio.CancelledError:
                    # The load was cancelled for want of waiters just before we came:
                    # start another, unless it is this request that is being cancelled.
                    if load.cancelled() and not _cancelling():
                        continue
                    raise
            elif facts.state in (State.STOPPED, State.IDLE, State.FAILED):
                raise Unavailable(f"model {name!r} is not served: {facts.reason()}")
            else:  # an always-on instance on its way up: wait for it
                await self._changes(name, facts.state)

    async def _changes(self, name: str, state: State) -> None:
        """Wait until `name` leaves `state` or the gateway pokes, at most POLL_S."""
        others = [s for s in State if s is not state]
        waiter = asyncio.ensure_future(self._changed.wait())
        moved = asyncio.ensure_future(self.sup.wait_for(name, *others, timeout=POLL_S))
        try:
            await asyncio.wait({waiter, moved}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            moved.cancel()

    def began(self, name: str, keep_alive: float | None) -> None:
        """A request is in flight: no idle stop, no eviction until it ends."""
        slot = self.slot(name)
        slot.in_flight += 1
        slot.last_used = time.monotonic()
        slot.expires = None
        if keep_alive is not None:
            slot.keep_alive = keep_alive

    def ended(self, name: str) -> None:
        """A request ended: the idle timer starts from now."""
        slot = self.slot(name)
        slot.in_flight -= 1
        slot.last_used = time.monotonic()
        if not slot.in_flight:
            self.after_last(name)
            self.poke()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _retrieve(task: asyncio.Task[None]) -> None:
    # Every waiter sees the outcome through shield(); this keeps asyncio from warning
    # about a failed load nobody waited for.
    if not task.cancelled():
        task.exception()
