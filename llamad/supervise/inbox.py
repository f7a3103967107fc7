"""An instance's events in arrival order: process exits, probe results, timers and
commands all come through it, so its task sees them in the order they happened."""

from __future__ import annotations

import asyncio

from llamad.lifecycle.states import Event


class InstanceClosed(Exception):
    """The instance's task has ended (removed from the config, or the daemon stopping):
    it takes no more events, and an event it never took in will never be."""

    def __init__(self, name: str) -> None:
        super().__init__(f"instance {name} is closed")
        self.name = name


class Inbox:
    """The queue of one instance's task; `send` returns once the task took its event in."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: asyncio.Queue[tuple[Event, asyncio.Future[None] | None]] = asyncio.Queue()
        self._ended = False

    def post(self, event: Event) -> None:
        """Queue an event (dropped once the task has ended)."""
        if not self._ended:
            self._queue.put_nowait((event, None))

    async def send(self, event: Event) -> None:
        """Queue an event and wait until the task has taken it in.

        Raises InstanceClosed when the task has ended, or ends before taking it in.
        """
        if self._ended:
            raise InstanceClosed(self._name)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((event, done))
        await done

    async def next(self) -> tuple[Event, asyncio.Future[None] | None]:
        """The next event, and the future its sender waits on (None for a post)."""
        return await self._queue.get()

    def end(self, current: asyncio.Future[None] | None) -> None:
        """The task ends: whoever waits on an event still queued (a rollout reaching an
        instance a reload removed), or on the one a cancellation cut short (`current`),
        learns so now rather than never."""
        self._ended = True
        waiting = [current]
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait()[1])
        for done in waiting:
            if done is not None and not done.done():
                done.set_exception(InstanceClosed(self._name))
