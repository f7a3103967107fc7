"""The instance lifecycle as one pure function: `step(record, event) -> (record, actions)`.

Nothing here touches a process, a clock or a random source; the caller passes `now` and
`jitter` in and carries the actions out. That keeps every transition testable as a table row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llamad.lifecycle.states import (
    Action,
    Arm,
    AwaitWorkers,
    Event,
    Exited,
    Failed,
    Knobs,
    ProbeFailed,
    ProbeOk,
    Ready,
    Record,
    Restart,
    RestartScheduled,
    Signal,
    Spawn,
    Spawned,
    SpawnFailed,
    Start,
    State,
    Stop,
    StopWaiting,
    Timer,
    WorkersMissing,
    WorkersReady,
)

Step = tuple[Record, list[Action]]


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


def _arm(rec: Record, delay: float) -> tuple[Record, Arm]:
    """Bump the timer token so any timer armed before this one arrives stale."""
    rec = replace(rec, timer=rec.timer + 1)
    return rec, Arm(token=rec.timer, delay=delay)


def _spawn(rec: Record, knobs: Knobs) -> Step:
    # The deadline is armed afresh for every launch, so a head that waited for its
    # workers still gets the whole start_timeout to load.
    rec = replace(rec, state=State.STARTING, pid=None, killed=False, waiting_for=())
    rec, arm = _arm(rec, knobs.start_timeout)
    return rec, [Spawn(), arm]


def _fresh_start(rec: Record, knobs: Knobs) -> Step:
    """A person asked for a start: forget past failures, including the flap guard's."""
    rec = replace(rec, failures=0, restart_times=(), probe_failures=0, error=None)
    return _spawn(replace(rec, then=State.STOPPED), knobs)


def _gone(rec: Record) -> Record:
    """The process is gone: forget it, and that we killed it."""
    return replace(rec, pid=None, killed=False)


def _terminate(rec: Record, knobs: Knobs, then: State) -> Step:
    rec, arm = _arm(replace(rec, state=State.STOPPING, then=then), knobs.stop_timeout)
    return rec, [Signal("TERM"), arm]


def _because(cause: str | None, detail: str | None, default: str) -> str:
    """Why the process went away: what we knew before it exited, plus what the exit said."""
    if cause and detail:
        return f"{cause}; {detail}"
    return cause or detail or default


def _retry(
    rec: Record, now: float, knobs: Knobs, jitter: float, reason: str, immediate: bool
) -> Step:
    """Decide on an automatic restart, unless the flap guard says the instance is hopeless."""
    recent = tuple(t for t in rec.restart_times if now - t < knobs.restart_window)
    if len(recent) >= knobs.max_restarts:
        # * -> FAILED: too many restarts inside the window; retrying would only flap.
        error = (
            f"{reason}; gave up after {knobs.max_restarts} restarts in {knobs.restart_window:g}s"
        )
        rec = replace(_gone(rec), state=State.FAILED, restart_times=recent, error=error)
        return rec, [Failed(reason=error)]
    rec = replace(rec, restart_times=(*recent, now), restarts=rec.restarts + 1, error=reason)
    attempt = len(rec.restart_times)
    if immediate:
        # RUNNING -> STARTING: a healthy run earns one restart without waiting.
        rec, actions = _spawn(rec, knobs)
        return rec, [RestartScheduled(0.0, attempt, reason), *actions]
    # STARTING -> BACKOFF: repeated failed starts wait exponentially longer. The exponent is
    # capped so a long failure streak (a huge max_restarts) cannot overflow the float.
    base = min(knobs.backoff_initial * 2 ** min(rec.failures - 1, 64), knobs.backoff_max)
    delay = base * (1 + knobs.backoff_jitter * jitter)
    rec, arm = _arm(replace(rec, state=State.BACKOFF), delay)
    return rec, [RestartScheduled(delay, attempt, reason), arm]


def _stopped(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    if isinstance(event, Start | Restart):
        # STOPPED -> STARTING
        return _fresh_start(rec, knobs)
    return rec, []


def _starting(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    timeout_error = f"not ready within {knobs.start_timeout:g}s"
    match event:
        case Spawned(pid=pid):
            # STARTING -> STARTING: now there is a process to probe and to signal.
            return replace(rec, pid=pid), []
        case SpawnFailed(reason=reason):
            # STARTING -> BACKOFF/FAILED
            rec = replace(_gone(rec), failures=rec.failures + 1)
            return _retry(rec, now, knobs, jitter, reason, immediate=False)
        case WorkersMissing(names=names) if rec.pid is None and not rec.waiting_for:
            # STARTING -> STARTING (waiting): the launch waits until the workers are ready.
            return replace(rec, waiting_for=names), [AwaitWorkers()]
        case WorkersReady() if rec.waiting_for:
            # STARTING (waiting) -> STARTING: launch now, with a fresh start deadline.
            return _spawn(rec, knobs)
        case Ready():
            # STARTING -> RUNNING: a healthy server wipes the slate of consecutive failures.
            return replace(rec, state=State.RUNNING, failures=0, probe_failures=0, error=None), []
        case ProbeFailed(reason=detail, fatal=True) if not rec.killed:
            # STARTING -> STARTING: the server gave up while loading; the kill's Exited retries.
            return replace(rec, error=f"unhealthy: {detail}", killed=True), [Signal("KILL")]
        case Exited(reason=detail):
            # STARTING -> BACKOFF/FAILED; a start deadline or fatal probe we enforced outranks
            # the exit status.
            reason = _because(rec.error if rec.killed else None, detail, "exited while starting")
            rec = replace(_gone(rec), failures=rec.failures + 1)
            return _retry(rec, now, knobs, jitter, reason, immediate=False)
        case Timer() if rec.waiting_for:
            # STARTING (waiting) -> BACKOFF/FAILED: workers that never come count as a failed
            # start, so the flap guard ends an endless wait as it ends a crash loop.
            missing = ", ".join(rec.waiting_for)
            reason = f"rpc workers not ready within {knobs.start_timeout:g}s: {missing}"
            rec = replace(rec, failures=rec.failures + 1, waiting_for=())
            rec, then = _retry(rec, now, knobs, jitter, reason, immediate=False)
            return rec, [StopWaiting(), *then]
        case Timer() if rec.pid is None:
            # STARTING -> BACKOFF/FAILED: the launch never reported back, so no Exited will come.
            rec = replace(rec, failures=rec.failures + 1)
            return _retry(rec, now, knobs, jitter, timeout_error, immediate=False)
        case Timer():
            # STARTING -> STARTING: the Exited that the kill causes does the retry.
            return replace(rec, error=timeout_error, killed=True), [Signal("KILL")]
        case Stop() if rec.pid is None:
            # STARTING -> STOPPED: nothing to signal; a waiting head stops waiting.
            unwait: list[Action] = [StopWaiting()] if rec.waiting_for else []
            return replace(rec, state=State.STOPPED, error=None, waiting_for=()), unwait
        case Stop():
            # STARTING -> STOPPING
            return _terminate(rec, knobs, then=State.STOPPED)
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
            reason = _because(rec.error if rec.killed else None, detail, "exited")
            rec = replace(_gone(rec), probe_failures=0, failures=0)
            return _retry(rec, now, knobs, jitter, reason, immediate=True)
        case Stop(idle=idle):
            # RUNNING -> STOPPING, to end IDLE when the gateway unloads it for want of use.
            return _terminate(rec, knobs, then=State.IDLE if idle else State.STOPPED)
        case Restart():
            # RUNNING -> STOPPING: admin restarts are not counted in `restarts`.
            return _terminate(rec, knobs, then=State.STARTING)
    return rec, []


def _backoff(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Timer():
            # BACKOFF -> STARTING: the delay is over; keep the error visible until RUNNING.
            return _spawn(rec, knobs)
        case Start() | Restart():
            # BACKOFF -> STARTING: a person acted, so skip the wait and forget the failures.
            return _fresh_start(rec, knobs)
        case Stop():
            # BACKOFF -> STOPPED: no process to stop; the armed timer is ignored in STOPPED.
            return replace(rec, state=State.STOPPED, error=None), []
    return rec, []


def _stopping(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Exited():
            then, rec = rec.then, replace(_gone(rec), then=State.STOPPED, error=None)
            if then is State.STARTING:
                # STOPPING -> STARTING: a requested restart is a fresh run, not a failure.
                return _spawn(replace(rec, failures=0, probe_failures=0), knobs)
            # STOPPING -> STOPPED or IDLE
            return replace(rec, state=then), []
        case Timer():
            # STOPPING -> STOPPING: stop_timeout passed without an exit; force it.
            return replace(rec, killed=True), [Signal("KILL")]
        case Start() | Restart():
            # STOPPING -> STOPPING: start again once the old process is gone.
            return replace(rec, then=State.STARTING), []
        case Stop():
            # STOPPING -> STOPPING: a later stop overrides a pending restart.
            return replace(rec, then=State.STOPPED), []
    return rec, []


def _failed(rec: Record, event: Event, now: float, knobs: Knobs, jitter: float) -> Step:
    match event:
        case Start() | Restart():
            # FAILED -> STARTING: only a person clears FAILED, and they get a clean slate.
            return _fresh_start(rec, knobs)
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
