"""A crash loses at most the last turn: the slots of a running llama-server are saved in
the background once the requests it answered since its last save added enough tokens.

The gateway tells `grew(instance, tokens)` as each request ends (a dict update, nothing
more on the request's path); `run` does the saves, one instance at a time, at most one
per instance every `cache_save_interval` seconds: what grows meanwhile is coalesced into
the next save, and only the slots that changed and hold `cache_save_tokens` or more are
written (`SlotCache.checkpoint`, which keeps to `cache_max` and the free-space floor like
every save). llama-server serves nothing while it writes a slot, so saves also keep to a
share of the time, and a short prompt is never worth that stall.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from llamad.backends.spec import InstanceSpec
from llamad.common.waits import first_of
from llamad.config.load import Daemon
from llamad.lifecycle.states import State
from llamad.supervise.instance import Instance
from llamad.supervise.slot_cache import SlotCache

# Background saves take at most this share of an instance's time (and of the disk's):
# a save that took 2 s waits 40 s before the next, whatever the interval.
MAX_SHARE = 0.05


class Checkpoints:
    """Background saves of instances' slots after their requests added tokens."""

    def __init__(
        self,
        cache: SlotCache,
        instances: Mapping[str, Instance],
        settings: Callable[[], Daemon],
    ) -> None:
        """`instances`: the supervisor's, by name; `settings()`: `[daemon]` as it is now
        (`cache_save_tokens`, `cache_save_interval`)."""
        self._cache, self._instances, self._settings = cache, instances, settings
        self._grown: dict[str, int] = {}  # tokens added since the last save began
        self._pending: set[str] = set()  # enough added: a save is owed
        self._due: dict[str, float] = {}  # loop time the next save may begin
        self._wake = asyncio.Event()

    def grew(self, instance: str, tokens: int) -> None:
        """Requests on `instance` added `tokens` to its slots (called as each ends)."""
        total = self._grown.get(instance, 0) + tokens
        self._grown[instance] = total
        wanted = self._settings().cache_save_tokens
        if 0 < wanted <= total and instance not in self._pending:
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
                # Owed no more from here: what is added during the save calls for the next.
                self._pending.discard(name)
                self._grown[name] = 0
                spec = self._serving(name)
                if spec is None or spec.prompt_cache is None:
                    continue
                began = loop.time()
                self._due[name] = began + self._settings().cache_save_interval
                await self._cache.checkpoint(spec, self._settings().cache_save_tokens)
                took = loop.time() - began
                self._due[name] = max(self._due[name], began + took / MAX_SHARE)

    def _serving(self, name: str) -> InstanceSpec | None:
        inst = self._instances.get(name)
        return inst.spec if inst is not None and inst.record.state is State.RUNNING else None


async def _either(stop: asyncio.Event, wake: asyncio.Event, timeout: float | None) -> None:
    """Wait until `stop` or `wake` is set, or `timeout` seconds have passed."""
    waits = [stop.wait(), wake.wait()]
    await first_of(*waits, *([] if timeout is None else [asyncio.sleep(timeout)]))
