"""Handovers: what a reload leaves running in the background, one name at a time.

A reload decides at once what every instance becomes (the supervisor's `wanted`) and
starts what it can. What must wait (the gateway's drain of a removed or changed model,
which lasts as long as its longest request in flight, then its stop and restart, or a
start on a port another instance still holds) is a handover: a task of the supervisor's
TaskGroup, so a later reload never waits for it.

The rules:
- One handover per name runs at a time. A wish that arrives while one runs is carried
  out by that one, if it has not read its wish yet (one restart); otherwise by one queued
  behind it, which reads the latest wish when it starts (two restarts, never at once).
- A handover's stop never waits for another handover: only its start does, for the
  handovers stopping the instances on the port it wants. A swap cannot deadlock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from llamad.common.retrying import describe

log = structlog.get_logger("llamad.supervisor")


@dataclass(eq=False)
class Handover:
    """One name's background work. Only its own task marks it."""

    name: str
    # The name's process is gone (or it had none): its port is free for another.
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    # The wish it carries out is read for good: a later one needs a handover of its own.
    taken: bool = False

    def take(self) -> None:
        """The handover read the wish it will carry out."""
        self.taken = True


Work = Callable[[Handover], Awaitable[None]]


class Handovers:
    """The handovers under way, by name: the first runs, at most one waits behind it."""

    def __init__(self) -> None:
        self._queues: dict[str, list[Handover]] = {}
        self._tasks: dict[Handover, asyncio.Task[None]] = {}

    def names(self) -> list[str]:
        """The names with a handover under way (draining, stopping or waiting for a port)."""
        return sorted(self._queues)

    def pending(self, name: str) -> bool:
        """True while a handover of `name` runs or waits."""
        return name in self._queues

    def ahead(self, name: str) -> bool:
        """True when a handover of `name` has yet to read its wish: it will carry out
        the latest one, starting what it starts from what is on disk then."""
        queue = self._queues.get(name, [])
        return len(queue) > 1 or (bool(queue) and not queue[0].taken)

    def begin(self, group: asyncio.TaskGroup, name: str, work: Work) -> None:
        """Have `work` carry out the latest wish for `name`: now, or after the handover
        under way, unless one already will."""
        if self.ahead(name):
            return
        queue = self._queues.setdefault(name, [])
        handover = Handover(name)
        before = self._tasks.get(queue[-1]) if queue else None
        queue.append(handover)
        task = group.create_task(self._run(handover, before, work), name=f"handover-{name}")
        self._tasks[handover] = task

    async def _run(self, handover: Handover, before: asyncio.Task[None] | None, work: Work) -> None:
        try:
            if before is not None:
                await asyncio.wait([before])
            await work(handover)
        except Exception as exc:  # one name's failure must not end every instance's group
            log.error(
                "config.drain_failed", instance=handover.name, error=describe(exc), exc_info=exc
            )
        finally:
            handover.take()
            handover.stopped.set()
            queue = self._queues[handover.name]
            queue.remove(handover)
            if not queue:
                del self._queues[handover.name]
            del self._tasks[handover]

    def stopping(self, names: list[str]) -> list[asyncio.Event]:
        """What a start must wait for on a port that `names`' instances hold: their
        running handovers' stops (none for a name that keeps its process)."""
        # Every handover of theirs, queued ones too: one queued behind a start will stop
        # that process later, and a start on its port must wait for that as well.
        queued = (h for n in names for h in self._queues.get(n, ()))
        return [h.stopped for h in queued if not h.stopped.is_set()]

    async def settled(self, name: str) -> None:
        """Wait until no handover of `name` runs or waits."""
        while tasks := [self._tasks[h] for h in self._queues.get(name, ())]:
            await asyncio.wait(tasks)

    async def cancel(self) -> None:
        """Cancel every handover and wait for their ends (shutdown)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
