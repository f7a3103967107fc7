"""A new llama-server binary, rolled out one instance at a time, each healthy before the next.

A broken upgrade (a build that answers --help but cannot serve) must cost one instance,
not all of them: when an instance does not come back on the new binary, the rollout
halts and the rest keep running their old processes. The next binary change (a fixed
build) retries the instances that failed on the broken one, then carries on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import structlog

from llamad.lifecycle.states import State
from llamad.supervise.inbox import InstanceClosed
from llamad.supervise.instance import Instance

log = structlog.get_logger("llamad.rollout")

# IDLE: stopped by the gateway for want of requests; it starts on the new build anyway.
_NOT_LIVE = (State.STOPPED, State.IDLE, State.FAILED)
_SETTLED = (State.RUNNING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)


class Rollout:
    """Restarts instances in turn; remembers those a halted rollout left down."""

    def __init__(self, restart: Callable[[Instance], Awaitable[None]]) -> None:
        self.failed: set[str] = set()
        self._restart = restart  # the supervisor's: drained by the gateway, when it has one

    async def run(self, instances: Iterable[Instance]) -> list[str]:
        """Restart each live instance (and each one a past rollout left failed) in turn.

        Returns the names restarted healthy; halts at the first that does not come back.
        """
        candidates = [i for i in instances if not i.closing]
        # Those the last (broken) build left down come first: they serve nothing now.
        retry = [i for i in candidates if i.spec.name in self.failed]
        live = [i for i in candidates if i.record.state not in _NOT_LIVE]
        order = [*retry, *(i for i in live if i not in retry)]
        done: list[str] = []
        for n, inst in enumerate(order):
            name = inst.spec.name
            try:
                await self._restart(inst)
            except InstanceClosed:  # a reload removed it while the rollout went on
                log.info("binary.rollout_skipped", instance=name, reason="removed")
                self.failed.discard(name)
                continue
            reason = await _outcome(inst)
            if reason is None:
                self.failed.discard(name)
                done.append(name)
                continue
            self.failed.add(name)
            log.error(
                "binary.rollout_halted",
                instance=name,
                reason=reason,
                not_restarted=[i.spec.name for i in order[n + 1 :]],
            )
            break
        return done


async def _outcome(inst: Instance) -> str | None:
    """None once `inst` runs again; otherwise why it did not come back."""
    # Past the restart's own stop: wait for the new process to settle one way or the other.
    stopped = await inst.wait_until(
        State.STARTING, *_SETTLED, timeout=inst.spec.knobs.stop_timeout + 5
    )
    settled = stopped and await inst.wait_until(*_SETTLED, timeout=inst.spec.knobs.start_timeout)
    state = inst.record.state
    if settled and state in (State.RUNNING, State.STOPPED, State.IDLE):  # stopped meanwhile
        return None
    if not settled:
        return f"not ready within start_timeout ({inst.spec.knobs.start_timeout:g}s)"
    return inst.record.error or f"{state.value} after restart"
