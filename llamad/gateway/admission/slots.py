"""The gateway's slots by model name, and the wake-ups of those who wait on them."""

from __future__ import annotations

import asyncio
import contextlib

from llamad.gateway.admission.rules import Slot

POLL_S = 0.25  # a wait for room also looks again this often (memory frees outside us)


class Slots:
    """The slots by model name, and a way to wake whoever waits on them."""

    def __init__(self) -> None:
        self._by_name: dict[str, Slot] = {}
        self._changed: asyncio.Event | None = None  # made when someone waits

    def slot(self, name: str) -> Slot:
        """The slot of `name`, made on first use. A request keeps the slot it was
        admitted to; it never looks its slot up again by name."""
        slot = self._by_name.get(name)
        if slot is None:
            slot = self._by_name[name] = Slot(name)
        return slot

    def current(self, name: str) -> Slot | None:
        """The slot `name` has now, made or not."""
        return self._by_name.get(name)

    def forget(self, name: str) -> None:
        """Drop the slot of a model a reload removed; leases on it still release it."""
        self._by_name.pop(name, None)

    def counts(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) by model, for the gauges and the status document."""
        return {n: (s.in_flight, s.waiting) for n, s in self._by_name.items()}

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
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.next_poke().wait()
