"""The moves the lifecycle's state handlers are made of: launch, terminate, retry or give up.

Pure, like the machine that composes them: records in, records and actions out.
"""

from __future__ import annotations

from dataclasses import replace

from llamad.lifecycle.actions import Action, Arm, Failed, RestartScheduled, Signal, Spawn
from llamad.lifecycle.states import Knobs, Record, Restart, Start, State

Step = tuple[Record, list[Action]]


def arm_timer(rec: Record, delay: float) -> tuple[Record, Arm]:
    """Bump the timer token so any timer armed before this one arrives stale."""
    rec = replace(rec, timer=rec.timer + 1)
    return rec, Arm(token=rec.timer, delay=delay)


def launch(rec: Record, knobs: Knobs) -> Step:
    # The deadline is armed afresh for every launch, so a head that waited for its
    # workers still gets the whole start_timeout to load.
    rec = replace(rec, state=State.STARTING, pid=None, killed=False, waiting_for=())
    rec, arm = arm_timer(rec, knobs.start_timeout)
    return rec, [Spawn(), arm]


def fresh_start(rec: Record, knobs: Knobs) -> Step:
    """A person asked for a start: forget past failures, including the flap guard's."""
    rec = replace(rec, failures=0, restart_times=(), probe_failures=0, error=None)
    return launch(replace(rec, then=State.STOPPED), knobs)


def forget_process(rec: Record) -> Record:
    """The process is gone: forget it, and that we killed it."""
    return replace(rec, pid=None, killed=False)


def terminate(rec: Record, knobs: Knobs, then: State) -> Step:
    rec, arm = arm_timer(replace(rec, state=State.STOPPING, then=then), knobs.stop_timeout)
    return rec, [Signal("TERM"), arm]


def because(cause: str | None, detail: str | None, default: str) -> str:
    """Why the process went away: what we knew before it exited, plus what the exit said."""
    if cause and detail:
        return f"{cause}; {detail}"
    return cause or detail or default


def retry(
    rec: Record, now: float, knobs: Knobs, jitter: float, reason: str, immediate: bool
) -> Step:
    """Decide on an automatic restart, unless the flap guard says the instance is hopeless."""
    recent = tuple(t for t in rec.restart_times if now - t < knobs.restart_window)
    if len(recent) >= knobs.max_restarts:
        # * -> FAILED: too many restarts inside the window; retrying would only flap.
        error = (
            f"{reason}; gave up after {knobs.max_restarts} restarts in {knobs.restart_window:g}s"
        )
        rec = replace(forget_process(rec), state=State.FAILED, restart_times=recent, error=error)
        return rec, [Failed(reason=error)]
    rec = replace(rec, restart_times=(*recent, now), restarts=rec.restarts + 1, error=reason)
    attempt = len(rec.restart_times)
    if immediate:
        # RUNNING -> STARTING: a healthy run earns one restart without waiting.
        rec, actions = launch(rec, knobs)
        return rec, [RestartScheduled(0.0, attempt, reason), *actions]
    # STARTING -> BACKOFF: repeated failed starts wait exponentially longer. The exponent is
    # capped so a long failure streak (a huge max_restarts) cannot overflow the float.
    base = min(knobs.backoff_initial * 2 ** min(rec.failures - 1, 64), knobs.backoff_max)
    delay = base * (1 + knobs.backoff_jitter * jitter)
    rec, arm = arm_timer(replace(rec, state=State.BACKOFF), delay)
    return rec, [RestartScheduled(delay, attempt, reason), arm]


def placed(rec: Record, event: Start | Restart) -> Record:
    """A Start says where the next process goes; a Restart keeps the place it had."""
    return replace(rec, device=event.device) if isinstance(event, Start) else rec
