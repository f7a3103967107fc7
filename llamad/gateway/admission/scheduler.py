"""Admitting requests: hold each until its model serves, at most `max_queue` waiting.

One load serves every waiter of a model. A waiter that leaves takes its place in the
queue with it, and a load nobody waits for any more is cancelled before it evicts
anything. A request is counted in flight in the same step that saw its model serving.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from llamad.common.waits import first_of
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.loads import Loads
from llamad.gateway.admission.rules import Slot, StopWhy
from llamad.gateway.admission.slots import POLL_S, Slots
from llamad.gateway.admission.stops import DOWN
from llamad.gateway.contract.port import QueueFull, QueueTimeout, Removed, Unavailable
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts


class Scheduler:
    """Decides whether a request goes now, waits or is refused, and when a model idles
    out; the slots it counts in and the loads it starts are its collaborators."""

    def __init__(
        self,
        supervisor: SupervisorView,
        settings: Callable[[], GatewayConfig],
        slots: Slots,
        loads: Loads,
    ) -> None:
        self.sup, self.settings, self.slots, self.loads = supervisor, settings, slots, loads

    def slot(self, name: str) -> Slot:
        """The slot of `name` (`Slots.slot`)."""
        return self.slots.slot(name)

    def size(self, name: str) -> int | None:
        """The footprint of `name`, measured or estimated (`Loads.size`)."""
        return self.loads.size(name)

    def counts(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) by model (`Slots.counts`)."""
        return self.slots.counts()

    async def close(self) -> None:
        """Cancel loads and stops under way (shutdown)."""
        await self.loads.close()

    async def admit(self, facts: Facts, keep_alive: float | None = None) -> tuple[Slot, Facts]:
        """Wait until `facts.name` serves (loading it on demand), then count one request
        in flight. Returns the slot to `release` and the facts it was admitted under.

        Raises QueueFull, QueueTimeout, LoadFailed, Unavailable or Removed."""
        name, slot = facts.name, self.slot(facts.name)
        if (now := self.try_admit(slot, keep_alive)) is not None:
            return slot, now
        cfg = self.settings()
        if not slot.enqueue(cfg.max_queue):
            raise QueueFull(f"{slot.waiting} requests already wait for model {name!r}")
        try:
            async with asyncio.timeout(cfg.queue_timeout):
                return slot, await self._until_admitted(slot, keep_alive)
        except TimeoutError:
            raise QueueTimeout(
                f"model {name!r} was not ready within {cfg.queue_timeout:g}s"
            ) from None
        finally:
            if slot.dequeue():
                self.loads.abandon(slot)

    def try_admit(
        self, slot: Slot, keep_alive: float | None, facts: Facts | None = None
    ) -> Facts | None:
        """Count one request in flight on `slot` if its model serves and admits now
        (`facts`: its snapshot, when the caller has just taken one)."""
        facts = facts or self.sup.facts(slot.name)
        if facts is None or facts.closing or facts.state is not State.RUNNING or not slot.admits:
            return None
        slot.admit(time.monotonic(), facts.pid, keep_alive)
        return facts

    async def _until_admitted(self, slot: Slot, keep_alive: float | None) -> Facts:
        name = slot.name
        while True:
            facts = self.sup.facts(name)
            if facts is None or facts.closing or self.slots.current(name) is not slot:
                raise Removed(name)
            if (admitted := self.try_admit(slot, keep_alive)) is not None:
                return admitted
            if not slot.admits or facts.state is State.STOPPING:
                await self._changes(name, facts.state)  # a stop or a drain must end first
            elif facts.spec.on_demand:
                await self._wait_for_load(slot)
            elif facts.state in DOWN:
                raise Unavailable(f"model {name!r} is not served: {facts.reason()}")
            else:  # an always-on instance on its way up: wait for it
                await self._changes(name, facts.state)

    async def _wait_for_load(self, slot: Slot) -> None:
        load = self.loads.join(slot)
        try:
            await asyncio.shield(load)
        except asyncio.CancelledError:
            # The load was cancelled for want of waiters just before we came: start
            # another, unless it is this request that is being cancelled.
            if load.cancelled() and not _cancelling():
                return
            raise

    async def _changes(self, name: str, state: State) -> None:
        """Wait until `name` leaves `state` or the gateway pokes, at most POLL_S."""
        others = [s for s in State if s is not state]
        await first_of(
            self.slots.next_poke().wait(), self.sup.wait_for(name, *others, timeout=POLL_S)
        )

    def release(self, slot: Slot) -> None:
        """A request admitted to `slot` ended: the idle timer starts from now, or a
        pending unload happens."""
        if not slot.release(time.monotonic()):
            return
        if slot.unload_pending and slot.ask_unload():
            self.loads.stops.soon(slot)
        else:
            self.arm(slot)
        self.slots.poke()

    async def unload(self, name: str) -> None:
        """Stop `name` now if nothing uses it, else once its last request ends."""
        slot = self.slot(name)
        if slot.ask_unload():
            await self.loads.stops.claimed(slot)

    # Idle timers -----------------------------------------------------------------------

    def timeout(self, name: str) -> float | None:
        """Seconds `name` stays loaded after its last request; None: for ever."""
        facts = self.sup.facts(name)
        # A pinned model stays until a person or a client unloads it (its prompt cache
        # is what it is pinned for).
        if facts is None or not facts.spec.on_demand or facts.spec.pinned:
            return None
        return self.slot(name).timeout(facts.spec.idle_timeout or None, facts.pid)

    def arm(self, slot: Slot) -> None:
        """Start `slot`'s idle timer from now; a timeout of 0 stops the model at once."""
        timeout = self.timeout(slot.name)
        slot.arm(time.monotonic(), timeout)
        if timeout == 0 and slot.claim_stop(StopWhy.IDLE):
            self.loads.stops.soon(slot)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
