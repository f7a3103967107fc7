"""A process that failed a request before answering: did it die, and which one follows it.

Whether it died is never guessed from a clock. A process that still lives and takes
connections on its port did not: the failure was the server's own, and is the answer. One
that does not has died or is dying, and the supervisor will see it exit: on a busy
machine later than anyone would guess, which is why that is waited for, for long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.slots import POLL_S
from llamad.gateway.admission.stops import DOWN
from llamad.gateway.contract.port import QueueTimeout, Removed, Unavailable
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

# The longest wait for the supervisor to see a process gone that no longer serves.
EXIT_SEEN_S = 30.0


class Crashes:
    """Tells a crash before the answer from the server's own failure, over the supervisor."""

    def __init__(self, supervisor: SupervisorView, settings: Callable[[], GatewayConfig]) -> None:
        self.sup, self.settings = supervisor, settings

    def _gone(self, name: str, pid: int) -> bool:
        facts = self.sup.facts(name)
        return facts is None or facts.pid != pid or facts.state is not State.RUNNING

    async def left(self, name: str, pid: int) -> bool:
        """True once the supervisor sees process `pid` no longer serving `name` (it exited,
        or is being stopped or restarted). False at once while it lives and takes
        connections, or when its exit is not seen within EXIT_SEEN_S."""
        others = [s for s in State if s is not State.RUNNING]
        try:
            async with asyncio.timeout(EXIT_SEEN_S):
                while not self._gone(name, pid):
                    if await self.sup.still_serves(name, pid):
                        return False
                    # Dead or dying: its exit reaches the supervisor when its loop gets to it.
                    await self.sup.wait_for(name, *others, timeout=POLL_S)
        except TimeoutError:
            return False
        return True

    async def running_again(self, name: str, pid: int) -> Facts:
        """Wait, at most `queue_timeout`, until `name` runs again in another process than
        `pid`, the one that crashed.

        Raises QueueTimeout, Unavailable or Removed."""
        cfg = self.settings()
        try:
            async with asyncio.timeout(cfg.queue_timeout):
                while True:
                    facts = self.sup.facts(name)
                    if facts is None or facts.closing:
                        raise Removed(name)
                    if facts.state is State.RUNNING and facts.pid != pid:
                        return facts
                    if facts.state in DOWN:
                        raise Unavailable(f"model {name!r} is not served: {facts.reason()}")
                    others = [s for s in State if s is not facts.state]
                    await self.sup.wait_for(name, *others, timeout=POLL_S)
        except TimeoutError:
            raise QueueTimeout(
                f"model {name!r} was not back within {cfg.queue_timeout:g}s"
            ) from None
