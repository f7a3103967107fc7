"""What an instance tells, and asks, the set it belongs to.

Passed to every `Instance` when it is made, so nothing is patched onto a shared object
afterwards: the supervisor implements these for its instances, and a test can implement
them to watch one instance alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from llamad.backends.probes import Health


class InstanceHooks(Protocol):
    """The supervisor's side of one instance."""

    def not_ready(self, names: tuple[str, ...]) -> list[str]:
        """Which of the local instances `names` are not running (an RPC head's workers)."""
        ...

    def exited(self, name: str) -> None:
        """The process of instance `name` exited (its RPC heads must restart)."""
        ...

    def remote_lost(self, head: str, worker: str) -> None:
        """The head's `worker` on a fleet peer restarted or stopped."""
        ...

    def observe_probe(self, name: str, health: Health) -> None:
        """One probe of instance `name` finished (latency for the metrics)."""
        ...


class ProbeFeed:
    """Probe results fanned out to listeners, who may arrive after the first probes.

    The metrics load with the web stack, after the instances have launched; the feed is
    what the supervisor gets at construction, and the metrics subscribe to it later.
    """

    def __init__(self) -> None:
        self._listeners: list[Callable[[str, Health], None]] = []

    def listen(self, listener: Callable[[str, Health], None]) -> None:
        """Call `listener(name, health)` for every probe from now on."""
        self._listeners.append(listener)

    def __call__(self, name: str, health: Health) -> None:
        for listener in self._listeners:
            listener(name, health)
