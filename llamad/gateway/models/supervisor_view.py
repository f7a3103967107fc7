"""What the gateway uses of the supervisor, so it can be driven by a stand-in in tests."""

from __future__ import annotations

from typing import Protocol

from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.facts import Facts


class SupervisorView(Protocol):
    """Names, facts, commands and waits: all the gateway asks of the supervisor."""

    def names(self) -> list[str]:
        """Every instance, in config order."""
        ...

    def facts(self, name: str) -> Facts | None:
        """A snapshot of instance `name`, or None when there is no such instance."""
        ...

    async def command(self, name: str, event: Start | Stop) -> None:
        """Send `event` to instance `name` and wait until it is taken in."""
        ...

    async def wait_for(self, name: str, *states: State, timeout: float) -> bool:
        """Wait until `name` is in one of `states`; False on timeout or when it is gone."""
        ...

    async def still_serves(self, name: str, pid: int) -> bool:
        """True when process `pid` of `name` lives and takes connections on its port
        now, whatever the supervisor has seen: a request it failed did not die with it."""
        ...
