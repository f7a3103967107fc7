"""One supervised instance: a task that reads its event queue and carries out the machine's actions.

The task is the only writer of the instance's record. Process exits, probe results,
timers and commands all arrive as events on the one queue, so they are seen in order.
"""

from __future__ import annotations

import asyncio
from collections import deque

import structlog

from llamad.backends.probes import Health
from llamad.backends.spec import InstanceSpec
from llamad.fleet.remote_workers import Found
from llamad.lifecycle.actions import (
    Action,
    Arm,
    AwaitWorkers,
    Failed,
    RestartScheduled,
    Signal,
    Spawn,
    StopWaiting,
)
from llamad.lifecycle.states import Event, Exited, Record, Spawned, State, Stop, Timer, WorkersReady
from llamad.supervise.hooks import InstanceHooks
from llamad.supervise.inbox import Inbox
from llamad.supervise.process import Child, ExitInfo
from llamad.supervise.runtime import Runtime
from llamad.supervise.spawn import await_workers, spawn
from llamad.supervise.stepping import advance
from llamad.supervise.watch import watch

log = structlog.get_logger("llamad.instance")


class Instance:
    """A llama-server the daemon keeps running; `run()` is its task."""

    def __init__(self, spec: InstanceSpec, runtime: Runtime, hooks: InstanceHooks) -> None:
        self.spec = spec
        self.runtime = runtime
        self.hooks = hooks
        self.record = Record()
        self.child: Child | None = None
        self.health: Health | None = None
        self.last_exit: ExitInfo | None = None
        self.log = runtime.open_log(spec)
        self._inbox = Inbox(spec.name)
        self._waiter: asyncio.Task[None] | None = None
        # The remote workers the waiter found running, for the launch it unblocked.
        self._found: Found | None = None
        self._followups: deque[Event] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._helpers: set[asyncio.Task[None]] = set()
        self._closing = False
        self.changed = asyncio.Event()

    # Commands ------------------------------------------------------------------

    def post(self, event: Event) -> None:
        """Queue an event for the instance task (dropped once the task has ended)."""
        self._inbox.post(event)

    async def send(self, event: Event) -> None:
        """Queue an event and wait until the task has taken it in.

        Raises InstanceClosed when the task has ended, or ends before taking it in.
        """
        await self._inbox.send(event)

    def close(self) -> None:
        """Stop the process and end the task once it is stopped (removal, shutdown)."""
        self._closing = True
        self.post(Stop())

    def kill_now(self) -> None:
        """SIGKILL the process group at once: a forced shutdown."""
        if self.child is not None:
            self.child.signal("KILL")

    def respec(self, spec: InstanceSpec) -> None:
        """Take a new spec. Knobs apply at once; a new launch needs a stop first."""
        if spec.secrets != self.spec.secrets:
            self.log.close()
            self.log = self.runtime.open_log(spec)
        self.spec = spec

    @property
    def closing(self) -> bool:
        """True once the instance is on its way out of the daemon."""
        return self._closing

    # The task ------------------------------------------------------------------

    async def run(self) -> None:
        """Process events until closed and stopped; on cancellation, leave no child behind."""
        done: asyncio.Future[None] | None = None
        try:
            while not (self._closing and self.record.state is State.STOPPED):
                event, done = await self._inbox.next()
                await self._guarded(event)
                while self._followups:
                    await self._guarded(self._followups.popleft())
                if done is not None and not done.done():
                    done.set_result(None)
        finally:
            self._inbox.end(done)
            self.kill_now()
            self._disarm()
            for task in list(self._helpers):
                task.cancel()
            self.log.close()

    async def _guarded(self, event: Event) -> None:
        # Nothing one instance's book-keeping raises may end the supervisor's TaskGroup
        # (and with it every other instance): it is logged, and the machine goes on.
        try:
            await self._handle(event)
        except Exception as exc:
            log.error(
                "instance.internal_error",
                instance=self.spec.name,
                event=type(event).__name__,
                error=f"{type(exc).__name__}: {exc}",
            )

    async def _handle(self, event: Event) -> None:
        before = self.record
        self.record, actions = await advance(self.spec, self.runtime.cache, before, event)
        if isinstance(event, Exited) and self.child is not None and self.child.pid == event.pid:
            self.child = None
        for action in actions:
            await self._do(action)
        self.changed.set()
        self.changed = asyncio.Event()

    async def _do(self, action: Action) -> None:
        match action:
            case Spawn():
                await self._spawn()
            case AwaitWorkers():
                self.log.mark(f"waiting for rpc workers: {', '.join(self.record.waiting_for)}")
                self._stop_waiting()
                self._waiter = self.helper(self._await_workers(), f"await-{self.spec.name}")
            case StopWaiting():
                self._stop_waiting()
            case Signal(name=name):
                if self.child is not None:
                    self.child.signal(name)
            case Arm(token=token, delay=delay):
                self._disarm()
                self._timer = asyncio.get_running_loop().call_later(delay, self.post, Timer(token))
            case RestartScheduled(delay=delay, attempt=attempt, reason=reason):
                log.warning(
                    "instance.restart_scheduled",
                    instance=self.spec.name,
                    delay_s=round(delay, 3),
                    attempt=attempt,
                    reason=reason,
                )
            case Failed(reason=reason):
                log.error("instance.failed", instance=self.spec.name, reason=reason)

    def _stop_waiting(self) -> None:
        if self._waiter is not None:
            self._waiter.cancel()
            self._waiter = None
        self._found = None

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # Process ---------------------------------------------------------------------

    async def _spawn(self) -> None:
        if self.child is not None:
            return
        found, self._found = self._found, None
        got = await spawn(self.spec, self.runtime, self.hooks, self.log, found, self.record.device)
        if not isinstance(got, tuple):
            self._followups.append(got)
            return
        self.child, remote = got
        self._followups.append(Spawned(self.child.pid))
        self.helper(watch(self, self.child, remote), f"watch-{self.child.pid}")

    async def _await_workers(self) -> None:
        self._found = await await_workers(self.spec, self.runtime, self.hooks, self.log)
        self.post(WorkersReady())

    def helper(self, coro: object, name: str) -> asyncio.Task[None]:
        """Run `coro` as a task of this instance's, cancelled when the instance ends."""
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)  # type: ignore[arg-type]
        self._helpers.add(task)
        task.add_done_callback(self._helpers.discard)
        return task

    # Views ---------------------------------------------------------------------

    async def wait_until(self, *states: State, timeout: float) -> bool:
        """Wait until the record is in one of `states`; False on timeout."""
        try:
            async with asyncio.timeout(timeout):
                while self.record.state not in states:
                    await self.changed.wait()
        except TimeoutError:
            return False
        return True

    def uptime(self) -> float | None:
        """Seconds since the current process started, if there is one."""
        if self.child is None:
            return None
        return asyncio.get_running_loop().time() - self.child.started
