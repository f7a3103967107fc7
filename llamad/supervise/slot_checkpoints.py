"""A crash loses at most the last turn: the slots of a running llama-server that hold
`cache_save_tokens` or more are saved in the background once they changed and went idle.

The gateway tells `grew(instance, held)` as each request ends (a dict update, nothing
more on the request's path): a request that left its slot holding `cache_save_tokens` or
more makes a save owed. `run` does the saves, one instance at a time, at most one per
instance every `cache_save_interval` seconds: a turn that ends meanwhile is saved when
the bound allows, coalesced with what else ended. Only the idle slots that changed and
hold enough are written (`SlotCache.checkpoint`, which keeps to `cache_max` and the
free-space floor like every save); a changed slot found busy keeps the save owed.
llama-server serves nothing while it writes a slot, so saves also keep to a share of the
time, and a short prompt is never worth that stall.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

from llamad.backends.spec import InstanceSpec
from llamad.common.waits import first_of
from llamad.config.load import Daemon
from llamad.lifecycle.states import State
from llamad.supervise.instance import Instance
from llamad.supervise.slot_cache import Written

# Background saves take at most this share of an instance's time (and of the disk's):
# a save that kept llama-server writing for 2 s waits 40 s before the next, whatever
# the interval.
MAX_SHARE = 0.05


class Saver(Protocol):
    """What writes the slots (`SlotCache`)."""

    async def checkpoint(self, spec: InstanceSpec, least: int = 0) -> Written:
        """Save the idle changed slots holding `least` tokens."""
        ...

    def served(self, instance: str, cached: int | None, evaluated: int | None) -> None:
        """A request on `instance` ended (the first after a restore judges it)."""
        ...


class Checkpoints:
    """Background saves of instances' slots after their requests changed them."""

    def __init__(
        self,
        cache: Saver,
        instances: Mapping[str, Instance],
        settings: Callable[[], Daemon],
    ) -> None:
        """`instances`: the supervisor's, by name; `settings()`: `[daemon]` as it is now
        (`cache_save_tokens`, `cache_save_interval`)."""
        self._cache, self._instances, self._settings = cache, instances, settings
        self._pending: set[str] = set()  # a slot worth saving changed: a save is owed
        self._due: dict[str, float] = {}  # loop time the next save may begin
        self._wake = asyncio.Event()

    def grew(
        self, instance: str, held: int, cached: int | None = None, evaluated: int | None = None
    ) -> None:
        """A request on `instance` ended, leaving its slot holding `held` tokens, having
        taken `cached` of its prompt's from the cache and evaluated `evaluated`."""
        self._cache.served(instance, cached, evaluated)
        wanted = self._settings().cache_save_tokens
        if 0 < wanted <= held and instance not in self._pending:
            self._pending.add(instance)
            self._wake.set()

    def owed(self) -> bool:
        """Some instance's save is owed and not yet begun."""
        return bool(self._pending)

    async def run(self, stop: asyncio.Event) -> None:
        """Save what is owed, as it falls due, until `stop` is set."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            self._wake.clear()
            now = loop.time()
            ready = sorted(n for n in self._pending if self._due.get(n, now) <= now)
            if not ready:
                later = [self._due[n] - now for n in self._pending]
                await _either(stop, self._wake, min(later, default=None))
                continue
            for name in ready:
                # Owed no more from here: a request that ends during the save owes the next.
                self._pending.discard(name)
                spec = self._serving(name)
                if spec is None or spec.prompt_cache is None:
                    continue
                began = loop.time()
                self._due[name] = began + self._settings().cache_save_interval
                done = await self._cache.checkpoint(spec, self._settings().cache_save_tokens)
                self._due[name] = max(self._due[name], began + done.seconds / MAX_SHARE)
                if done.busy:  # a changed slot was busy: deferred to the next save, not dropped
                    self._pending.add(name)

    def _serving(self, name: str) -> InstanceSpec | None:
        inst = self._instances.get(name)
        return inst.spec if inst is not None and inst.record.state is State.RUNNING else None


async def _either(stop: asyncio.Event, wake: asyncio.Event, timeout: float | None) -> None:
    """Wait until `stop` or `wake` is set, or `timeout` seconds have passed."""
    waits = [stop.wait(), wake.wait()]
    await first_of(*waits, *([] if timeout is None else [asyncio.sleep(timeout)]))
