"""The set of instances: one task each in a TaskGroup, and applying a new set of specs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext

import structlog

from llamad.backends.probes import Health
from llamad.config.load import InstanceSpec
from llamad.lifecycle.states import Restart, Start, State
from llamad.supervise.changes import Changes, compare
from llamad.supervise.hook_relay import HookRelay
from llamad.supervise.instance import Instance
from llamad.supervise.rollout import Rollout
from llamad.supervise.runtime import Runtime
from llamad.supervise.steps import DOWN, start, stop, update_in_place

log = structlog.get_logger("llamad.supervisor")

# Where a restart goes once the old process is gone.
_PAST_STOP = (State.STARTING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)

# (removed, changed) -> a context around stopping and restarting them: the gateway's drain.
Drain = Callable[[list[str], list[str]], AbstractAsyncContextManager[None]]


class Supervisor(HookRelay):
    """Owns the instances; `run()` holds their tasks until `shutdown()`.

    It is every instance's `InstanceHooks`: workers' readiness and exits, remote workers
    lost, and probe results, which go on to `observe_probe`.
    """

    def __init__(
        self,
        runtime: Runtime,
        observe_probe: Callable[[str, Health], None] = lambda name, health: None,
        draining: Drain = lambda removed, changed: nullcontext(),
    ) -> None:
        self.runtime = runtime
        self._observe_probe = observe_probe
        self._draining = draining
        self.instances: dict[str, Instance] = {}
        self._tasks: dict[Instance, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._started = asyncio.Event()
        self._closed = asyncio.Event()
        self.rollout = Rollout(self.restart)

    async def run(self) -> None:
        """Hold every instance task; returns after `shutdown()` once all have ended."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            self._started.set()
            await self._closed.wait()
        self._group = None

    async def apply(self, specs: dict[str, InstanceSpec]) -> Changes:
        """Make the running set match `specs`, touching only what differs.

        What goes away or changes is stopped first, so a port handed from one instance
        to another (a swap, a rename) is free before anything binds it. What is added on
        a port of its own starts at once: the drain of what goes may last minutes (a long
        stream), and a model that appears meanwhile is routable without waiting for it.
        """
        await self._started.wait()
        changes = compare({n: i.spec for n, i in self.instances.items()}, specs)
        going = {self.instances[n].spec.port for n in (*changes.removed, *changes.changed)}
        now = [n for n in changes.added if specs[n].port not in going]
        later = [n for n in changes.added if n not in now]
        # The gateway lets requests in flight finish first and holds new ones until the end;
        # an added instance is held the same way until its start is taken in, so a request
        # never finds it stopped between its arrival and its first start.
        if now:
            async with self._draining([], now):
                await self._launch(self._add_all(specs, now))
        async with self._draining(changes.removed, changes.changed + later):
            await self._replace(specs, changes, later)
        return changes

    async def _replace(
        self, specs: dict[str, InstanceSpec], changes: Changes, added: list[str]
    ) -> None:
        retiring = [self.instances.pop(n) for n in changes.removed]
        for inst in retiring:
            inst.close()
        restarting = [self.instances[n] for n in changes.changed]
        # A changed instance comes back if it was live (a failed one is tried again with
        # its new spec) or should autostart; one a person stopped stays stopped.
        wanted = {i: i.record.state not in DOWN or specs[i.spec.name].autostart for i in restarting}
        await asyncio.gather(
            *(self._tasks[i] for i in retiring if i in self._tasks),
            *(stop(i) for i in restarting),
        )
        for name in changes.unchanged:
            update_in_place(self.instances[name], specs[name])
        starting = []
        for inst in restarting:
            inst.respec(specs[inst.spec.name])
            if wanted[inst]:
                starting.append(inst)
        await self._launch([*starting, *self._add_all(specs, added)])

    def _add_all(self, specs: dict[str, InstanceSpec], names: list[str]) -> list[Instance]:
        """Add an instance for each of `names`; returns those to start now (an on-demand
        one waits for its first request)."""
        return [inst for n in names if (inst := self._add(specs[n])).spec.autostart]

    async def _launch(self, starting: list[Instance]) -> None:
        # Returns once each start is taken in: nothing the caller does can delay a launch.
        await asyncio.gather(*(start(inst) for inst in starting))

    def _add(self, spec: InstanceSpec) -> Instance:
        assert self._group is not None, "apply() before run()"
        inst = Instance(spec, self.runtime, self)
        self.instances[spec.name] = inst
        task = self._group.create_task(inst.run(), name=f"instance-{spec.name}")
        self._tasks[inst] = task
        task.add_done_callback(lambda _t: self._tasks.pop(inst, None))
        return inst

    async def restart(self, inst: Instance) -> None:
        """Restart `inst` (start it, when it failed) inside the gateway's drain: its
        requests in flight end first, and new ones wait for the new process. Raises
        InstanceClosed when a reload removed it meanwhile."""
        async with self._draining([], [inst.spec.name]):
            await inst.send(Start() if inst.record.state is State.FAILED else Restart())
            # The drain holds new requests until the old process is gone, so none of them
            # reaches it, or finds nothing listening between the stop and the start.
            await inst.wait_until(*_PAST_STOP, timeout=inst.spec.knobs.stop_timeout + 5)

    async def restart_one_by_one(self, names: list[str]) -> list[str]:
        """Roll a new executable out to `names`: each live one in turn, healthy before the
        next; halts at one that does not come back, retried next time (see rollout.py)."""
        return await self.rollout.run([i for n in names if (i := self.instances.get(n))])

    async def shutdown(self) -> None:
        """Stop every instance in parallel within its stop_timeout, then end `run()`."""
        await self._started.wait()
        for inst in self.instances.values():
            inst.close()
        tasks = list(self._tasks.values())
        if tasks:
            budget = max(i.spec.knobs.stop_timeout for i in self.instances.values()) + 5
            waiter = asyncio.gather(*tasks, return_exceptions=True)
            done, _ = await asyncio.wait([waiter], timeout=budget)
            if waiter not in done:
                # Past every stop budget: nothing may outlive the daemon.
                self.kill_all()
                await asyncio.wait_for(waiter, 5)
        self._closed.set()
