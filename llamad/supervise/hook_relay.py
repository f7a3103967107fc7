"""The supervisor as its instances see it, and as a whole: every instance's
`InstanceHooks` (workers' readiness and exits, remote workers lost, probe results handed
on to an observer), counts and waits across the instances, and the forced kill."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import structlog

from llamad.backends.probes import Health
from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.facts import ByName
from llamad.supervise.instance import Instance

log = structlog.get_logger("llamad.supervisor")


class HookRelay(ByName):
    """`InstanceHooks` over the instances by name: an RPC head restarts when one of its
    workers exits, and each probe goes on to `observe_probe`."""

    _observe_probe: Callable[[str, Health], None]

    def not_ready(self, names: tuple[str, ...]) -> list[str]:
        """Which of `names` are not running (an RPC head waits for its workers)."""
        return [
            n
            for n in names
            if (i := self.instances.get(n)) is None or i.record.state is not State.RUNNING
        ]

    def observe_probe(self, name: str, health: Health) -> None:
        """A probe finished: hand it on to the observer given at construction."""
        self._observe_probe(name, health)

    def exited(self, name: str) -> None:
        """A process exited: the heads using it as a worker restart."""
        for head in self.instances.values():
            if name in head.spec.workers:
                self._restart_head(head, name)

    def remote_lost(self, name: str, worker: str) -> None:
        """The same for a worker on a fleet peer: the head's watcher saw it restart."""
        head = self.instances.get(name)
        if head is not None:
            self._restart_head(head, worker)

    @staticmethod
    def _restart_head(head: Instance, worker: str) -> None:
        # A head that lost a worker stays up and answers 200, but aborts on the next
        # request: restart it, and let it wait until the worker is back.
        if head.record.state not in (State.RUNNING, State.STARTING) or head.closing:
            return
        log.warning("rpc.worker_exited", instance=head.spec.name, worker=worker)
        head.post(Stop())
        head.post(Start())

    def summary(self) -> str:
        """Instances per state, e.g. "1 failed, 2 running" (systemd's STATUS= line)."""
        counts = Counter(i.record.state.value for i in self.instances.values())
        return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no instances"

    async def settled(self, timeout: float) -> None:
        """Wait until no instance is starting, or `timeout` seconds."""
        settled = [s for s in State if s is not State.STARTING]
        starting = [i for i in self.instances.values() if i.record.state is State.STARTING]
        await asyncio.gather(*(i.wait_until(*settled, timeout=timeout) for i in starting))

    def kill_all(self) -> None:
        """SIGKILL every child now (a second SIGINT)."""
        for inst in self.instances.values():
            inst.kill_now()
