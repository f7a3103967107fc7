"""The set of instances: one task each in a TaskGroup, and applying a new set of specs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext

import structlog

from llamad.backends.probes import Health
from llamad.common.waits import first_of
from llamad.config.load import InstanceSpec
from llamad.lifecycle.states import Restart, Start, State
from llamad.supervise.changes import Changes, compare
from llamad.supervise.handover import Handover, Handovers
from llamad.supervise.hook_relay import HookRelay
from llamad.supervise.inbox import InstanceClosed
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
        self.wanted: dict[str, InstanceSpec] = {}  # the latest reload's wish, by name
        self.handovers = Handovers()
        self._stopping = False
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
        """Make the running set match `specs`, touching only what differs; returns once
        what can start at once has started. The rest is left to handovers
        (handover.py): a drain may last minutes (a long stream), and neither the next
        reload nor a model that appears meanwhile waits for it.

        What is added on a port nobody holds starts now; a removed model is unknown to
        new requests from now on, though its handover still drains it.
        """
        await self._started.wait()
        if self._stopping:
            return Changes()
        # The decision and its marks in one step: `wanted` is what the gateway reads.
        changes = compare(self.wanted, specs)
        before, self.wanted = self.wanted, dict(specs)
        held = {inst.spec.port for inst in self.instances.values()}
        now = []
        for name in (*changes.added, *changes.changed, *changes.removed, *changes.unchanged):
            if name in changes.unchanged and specs[name] == before[name]:
                continue
            if self.handovers.pending(name):
                self._hand_over(name)  # queued behind, or read by, the one under way
            elif name in changes.unchanged and name in self.instances:
                update_in_place(self.instances[name], specs[name])
            elif name in changes.added and specs[name].port not in held:
                now.append(name)
            else:
                self._hand_over(name)
        # The gateway holds requests for an added model until its start is taken in, so
        # none finds it stopped between its arrival and its first start.
        if now:
            async with self._draining([], now):
                # Back once each start is taken in: nothing the caller does delays a launch.
                await asyncio.gather(*(start(inst) for inst in self._add_all(specs, now)))
        return changes

    def draining(self) -> list[str]:
        """The instances whose handover (drain, stop, restart or start) is under way."""
        return self.handovers.names()

    def _hand_over(self, name: str) -> None:
        assert self._group is not None, "apply() before run()"
        self.handovers.begin(self._group, name, self._carry_out)

    async def _carry_out(self, handover: Handover) -> None:
        """Bring `handover.name` to the latest wish: drain, stop, then remove, restart
        with the new spec, or add; logs `config.drained` once done."""
        name, t0 = handover.name, time.monotonic()
        inst, want = self.instances.get(name), self.wanted.get(name)
        if inst is None and want is None:  # added, then removed before its port was free
            handover.take()
        elif inst is None or want is None or want.launch != inst.spec.launch:
            live = inst is not None and inst.record.state not in DOWN
            removed, changed = ([name], []) if want is None else ([], [name])
            # Requests in flight end first; new ones wait (or, for a removal, get 404).
            async with self._draining(removed, changed):
                if inst is not None:
                    await stop(inst)
                handover.stopped.set()
                outcome = await self._take_wish(handover, inst, live)
            seconds = round(time.monotonic() - t0, 3)
            log.info("config.drained", instance=name, outcome=outcome, seconds=seconds)
        else:  # a queued wish the one before it already carried out (knobs, at most)
            handover.take()
            update_in_place(inst, want)

    async def _take_wish(self, handover: Handover, inst: Instance | None, live: bool) -> str:
        """Past the stop: wait until no other instance holds the port wanted, then apply
        the latest wish in the step that saw it free. Returns what was done."""
        name = handover.name
        while True:
            want = self.wanted.get(name)
            holders = [] if want is None else self._holders(name, want.port)
            if not (stopping := self.handovers.stopping(holders)):
                break
            await first_of(*(e.wait() for e in stopping))
        handover.take()
        if want is None:
            if inst is None:
                return "dropped"
            del self.instances[name]
            inst.close()
            if (task := self._tasks.get(inst)) is not None:
                await asyncio.wait([task])
            return "removed"
        outcome = "restarted" if inst is not None else "started"
        if inst is None:
            inst = self._add(want)
        elif inst.spec != want:
            inst.respec(want)
        # A changed instance comes back if it was live (a failed one is tried again with
        # its new spec) or should autostart; one a person stopped stays stopped.
        if not (live or want.autostart):
            return "stopped"
        await start(inst)
        return outcome

    def _holders(self, name: str, port: int) -> list[str]:
        return [n for n, i in self.instances.items() if n != name and i.spec.port == port]

    def _add_all(self, specs: dict[str, InstanceSpec], names: list[str]) -> list[Instance]:
        """Add an instance for each of `names`; returns those to start now (an on-demand
        one waits for its first request)."""
        return [inst for n in names if (inst := self._add(specs[n])).spec.autostart]

    def _add(self, spec: InstanceSpec) -> Instance:
        assert self._group is not None, "apply() before run()"
        inst = Instance(spec, self.runtime, self)
        self.instances[spec.name] = inst
        task = self._group.create_task(inst.run(), name=f"instance-{spec.name}")
        self._tasks[inst] = task
        task.add_done_callback(lambda _t: self._tasks.pop(inst, None))
        return inst

    async def restart(self, inst: Instance) -> None:
        """Restart `inst` (start it, when failed) inside the gateway's drain: requests in
        flight end first, new ones wait for it. InstanceClosed: a reload removed it."""
        name = inst.spec.name
        while self.handovers.pending(name):
            if self.handovers.ahead(name):
                return  # a reload's handover restarts it anyway: one process at a time
            await self.handovers.settled(name)  # its wish is read: restart after it
        if inst.closing:
            raise InstanceClosed(name)
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
        """Stop every instance in parallel within its stop_timeout, then end `run()`.
        Handovers under way end first: every instance stops anyway."""
        await self._started.wait()
        self._stopping = True
        await self.handovers.cancel()
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
