"""The instance lifecycle as one pure function: `step(record, event) -> (record, actions)`.

Nothing here touches a process, a clock or a random source; the caller passes `now` and
`jitter` in and carries the actions out. That keeps every transition testable as a table row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llamad.lifecycle.actions import Action, AwaitWorkers, Signal, StopWaiting
from llamad.lifecycle.moves import (
    Step,
    because,
    forget_process,
    fresh_start,
    launch,
    placed,
    retry,
    terminate,
)
from llamad.lifecycle.states import (
    Event,
    Exited,
    Knobs,
    ProbeFailed,
    ProbeOk,
    Ready,
    Record,
    Restart,
    Spawned,
    SpawnFailed,
    Start,
    State,
    Stop,
    Timer,
    WorkersMissing,
    WorkersReady,
)


def step(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float = 0.0) -> Step:
    """Apply `event` to `rec` and return the new record and the actions to carry out.

    `now` is a monotonic time in seconds; `jitter` in [-1, 1] scales the backoff delay by
    `1 + knobs.backoff_jitter * jitter`. Stale timers (token != rec.timer) and events about
    a process other than `rec.pid` are ignored: the record comes back unchanged, no actions.
    """
    if isinstance(event, Timer) and event.token != rec.timer:
        return rec, []
    if isinstance(event, Exited | Ready | ProbeOk | ProbeFailed) and event.pid != rec.pid:
        return rec, []
    return _HANDLERS[rec.state](rec, event, now, knobs, max(-1.0, min(1.0, jitter)))


def _stopped(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    if isinstance(event, Start | Restart):
        # STOPPED -> STARTING
        return fresh_start(placed(rec, event), knobs)
    return rec, []


def _starting(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    timeout_error = f"not ready within {knobs.start_timeout:g}s"
    match event:
        case Spawned(pid=pid):
            # STARTING -> STARTING: now there is a process to probe and to signal.
            return replace(rec, pid=pid), []
        case SpawnFailed(reason=reason):
            # STARTING -> BACKOFF/FAILED
            rec = replace(forget_process(rec), failures=rec.failures + 1)
            return retry(rec, now, knobs, jitter, reason, immediate=False)
        case WorkersMissing(names=names) if rec.pid is None and not rec.waiting_for:
            # STARTING -> STARTING (waiting): the launch waits until the workers are ready.
            return replace(rec, waiting_for=names), [AwaitWorkers()]
        case WorkersReady() if rec.waiting_for:
            # STARTING (waiting) -> STARTING: launch now, with a fresh start deadline.
            return launch(rec, knobs)
        case Ready():
            # STARTING -> RUNNING: a healthy server wipes the slate of consecutive failures.
            return replace(rec, state=State.RUNNING, failures=0, probe_failures=0, error=None), []
        case ProbeFailed(reason=detail, fatal=True) if not rec.killed:
            # STARTING -> STARTING: the server gave up while loading; the kill's Exited retries.
            return replace(rec, error=f"unhealthy: {detail}", killed=True), [Signal("KILL")]
        case Exited(reason=detail):
            # STARTING -> BACKOFF/FAILED; a start deadline or fatal probe we enforced outranks
            # the exit status.
            reason = because(rec.error if rec.killed else None, detail, "exited while starting")
            rec = replace(forget_process(rec), failures=rec.failures + 1)
            return retry(rec, now, knobs, jitter, reason, immediate=False)
        case Timer() if rec.waiting_for:
            # STARTING (waiting) -> BACKOFF/FAILED: workers that never come count as a failed
            # start, so the flap guard ends an endless wait as it ends a crash loop.
            missing = ", ".join(rec.waiting_for)
            reason = f"rpc workers not ready within {knobs.start_timeout:g}s: {missing}"
            rec = replace(rec, failures=rec.failures + 1, waiting_for=())
            rec, then = retry(rec, now, knobs, jitter, reason, immediate=False)
            return rec, [StopWaiting(), *then]
        case Timer() if rec.pid is None:
            # STARTING -> BACKOFF/FAILED: the launch never reported back, so no Exited will come.
            rec = replace(rec, failures=rec.failures + 1)
            return retry(rec, now, knobs, jitter, timeout_error, immediate=False)
        case Timer():
            # STARTING -> STARTING: the Exited that the kill causes does the retry.
            return replace(rec, error=timeout_error, killed=True), [Signal("KILL")]
        case Stop(idle=idle) if rec.pid is None:
            # STARTING -> STOPPED (IDLE when the gateway evicts it): nothing to signal; a
            # waiting head stops waiting.
            unwait: list[Action] = [StopWaiting()] if rec.waiting_for else []
            down = State.IDLE if idle else State.STOPPED
            return replace(rec, state=down, error=None, waiting_for=()), unwait
        case Stop(idle=idle):
            # STARTING -> STOPPING, to end IDLE when the gateway evicts it mid-load.
            return terminate(rec, knobs, then=State.IDLE if idle else State.STOPPED)
    # Start/Restart while starting are coalesced into the start already under way.
    return rec, []


def _running(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case ProbeOk():
            # RUNNING -> RUNNING: only consecutive failures mean unhealthy.
            return replace(rec, probe_failures=0), []
        case ProbeFailed(reason=detail, fatal=fatal):
            n = rec.probe_failures + 1
            if fatal:  # one is enough, unless the kill is already under way
                n = max(n, knobs.unhealthy_after)
            rec = replace(rec, probe_failures=n)
            # `>=`: unhealthy_after may be lowered mid-streak, and the kill must still come.
            if n < knobs.unhealthy_after or rec.killed:
                # RUNNING -> RUNNING: not yet unhealthy, or already killed and awaiting Exited.
                return rec, []
            # RUNNING -> RUNNING: a hung server is not trusted to stop gracefully.
            count = "fatal probe" if fatal else f"{n} failed probes"
            error = f"unhealthy: {count}" + (f" ({detail})" if detail else "")
            return replace(rec, error=error, killed=True), [Signal("KILL")]
        case Exited(reason=detail):
            # RUNNING -> STARTING/FAILED: a crash after a healthy run restarts at once.
            reason = because(rec.error if rec.killed else None, detail, "exited")
            rec = replace(forget_process(rec), probe_failures=0, failures=0)
            return retry(rec, now, knobs, jitter, reason, immediate=True)
        case Stop(idle=idle):
            # RUNNING -> STOPPING, to end IDLE when the gateway unloads it for want of use.
            return terminate(rec, knobs, then=State.IDLE if idle else State.STOPPED)
        case Restart():
            # RUNNING -> STOPPING: admin restarts are not counted in `restarts`.
            return terminate(rec, knobs, then=State.STARTING)
    return rec, []


def _backoff(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Timer():
            # BACKOFF -> STARTING: the delay is over; keep the error visible until RUNNING.
            return launch(rec, knobs)
        case Start() | Restart():
            # BACKOFF -> STARTING: a person acted, so skip the wait and forget the failures.
            return fresh_start(placed(rec, event), knobs)
        case Stop(idle=idle):
            # BACKOFF -> STOPPED (IDLE when the gateway evicts it): no process to stop; the
            # armed timer is ignored in STOPPED and IDLE.
            return replace(rec, state=State.IDLE if idle else State.STOPPED, error=None), []
    return rec, []


def _stopping(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Exited():
            then, rec = rec.then, replace(forget_process(rec), then=State.STOPPED, error=None)
            if then is State.STARTING:
                # STOPPING -> STARTING: a requested restart is a fresh run, not a failure.
                return launch(replace(rec, failures=0, probe_failures=0), knobs)
            # STOPPING -> STOPPED or IDLE
            return replace(rec, state=then), []
        case Timer():
            # STOPPING -> STOPPING: stop_timeout passed without an exit; force it.
            return replace(rec, killed=True), [Signal("KILL")]
        case Start() | Restart():
            # STOPPING -> STOPPING: start again once the old process is gone.
            return replace(placed(rec, event), then=State.STARTING), []
        case Stop(idle=idle):
            # STOPPING -> STOPPING: a later stop overrides a pending restart; llamad's own
            # (idle) stop never overrides a person's.
            down = State.IDLE if idle and rec.then is not State.STOPPED else State.STOPPED
            return replace(rec, then=down), []
    return rec, []


def _failed(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Start() | Restart():
            # FAILED -> STARTING: only a person clears FAILED, and they get a clean slate.
            return fresh_start(placed(rec, event), knobs)
        case Stop():
            # FAILED -> STOPPED: the person has seen the failure; stop showing it.
            return replace(rec, state=State.STOPPED, error=None), []
    return rec, []


def _idle(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    if isinstance(event, Stop) and not event.idle:
        # IDLE -> STOPPED: a person's stop (or removal, shutdown) outranks llamad's own.
        return replace(rec, state=State.STOPPED), []
    # IDLE -> STARTING on Start, like STOPPED.
    return _stopped(rec, event, now, knobs, jitter)


_HANDLERS: dict[State, Callable[[Record, Event, float, Knobs, float], Step]] = {
    State.STOPPED: _stopped,
    State.STARTING: _starting,
    State.RUNNING: _running,
    State.BACKOFF: _backoff,
    State.STOPPING: _stopping,
    State.FAILED: _failed,
    State.IDLE: _idle,
}
