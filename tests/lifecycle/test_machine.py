"""Table tests for `machine.step`: no processes, no clock, just records, events and actions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any

import pytest

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
from llamad.lifecycle.machine import step
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

K = Knobs(
    start_timeout=30.0,
    stop_timeout=10.0,
    backoff_initial=1.0,
    backoff_max=8.0,
    backoff_jitter=0.0,
    max_restarts=3,
    restart_window=100.0,
    unhealthy_after=3,
)
PID = 42  # the process the record knows about
OTHER = 99  # a process it does not (an old one)
T = 7  # the currently armed timer token; the next Arm uses T + 1
NOW = 1000.0
TIMEOUT = "not ready within 30s"
UNHEALTHY = "unhealthy: 3 failed probes (timeout)"
WORKERS = ("w1", "peer/w2")
NO_WORKERS = "rpc workers not ready within 30s: w1, peer/w2"
S = State


def rec(state: State, **fields: Any) -> Record:
    """A record in `state`, owning process PID when that state has one, with timer token T."""
    pid = PID if state in (S.STARTING, S.RUNNING, S.STOPPING) else None
    return replace(Record(state=state, pid=pid, timer=T), **fields)


def row(
    name: str,
    given: Record,
    event: Event,
    state: State,
    actions: Iterable[Action] = (),
    **fields: Any,
) -> Any:
    if " ignores " in name:  # an ignored event leaves the record exactly as it was
        fields = {**asdict(given), **fields}
    return pytest.param(given, event, state, list(actions), fields, id=name)


SPAWN: list[Action] = [Spawn(), Arm(T + 1, 30.0)]
TERM: list[Action] = [Signal("TERM"), Arm(T + 1, 10.0)]
KILL: list[Action] = [Signal("KILL")]
CLEAN = {"failures": 0, "restart_times": (), "probe_failures": 0, "error": None}
DIRTY = {"failures": 2, "restart_times": (NOW - 1,), "probe_failures": 1, "error": "boom"}


def backoff(delay: float, reason: str) -> list[Action]:
    return [RestartScheduled(delay, 1, reason), Arm(T + 1, delay)]


def at_once(reason: str) -> list[Action]:
    return [RestartScheduled(0.0, 1, reason), *SPAWN]


TABLE = [
    # STOPPED
    row("STOPPED->STARTING on Start", rec(S.STOPPED, **DIRTY), Start(), S.STARTING, SPAWN, **CLEAN),
    row("STOPPED->STARTING on Restart", rec(S.STOPPED), Restart(), S.STARTING, SPAWN),
    row("STOPPED ignores Stop", rec(S.STOPPED), Stop(), S.STOPPED),
    row("STOPPED ignores a leftover Timer", rec(S.STOPPED), Timer(T), S.STOPPED),
    row("STOPPED ignores a late WorkersReady", rec(S.STOPPED), WorkersReady(), S.STOPPED),
    # STARTING
    row("STARTING records pid on Spawned", rec(S.STARTING, pid=None), Spawned(5), S.STARTING,
        pid=5),
    row("STARTING->BACKOFF on SpawnFailed", rec(S.STARTING, pid=None), SpawnFailed("port taken"),
        S.BACKOFF, backoff(1.0, "port taken"), failures=1, restarts=1, error="port taken"),
    row("STARTING->RUNNING on Ready", rec(S.STARTING, **DIRTY), Ready(PID), S.RUNNING,
        failures=0, probe_failures=0, error=None),
    row("STARTING->BACKOFF on Exited", rec(S.STARTING), Exited(PID, "exit code 1"), S.BACKOFF,
        backoff(1.0, "exit code 1"), pid=None, failures=1, restart_times=(NOW,)),
    row("STARTING->BACKOFF on Exited without reason", rec(S.STARTING, error="port taken"),
        Exited(PID), S.BACKOFF, backoff(1.0, "exited while starting")),
    row("STARTING->BACKOFF on Exited after start timeout keeps the timeout as reason",
        rec(S.STARTING, error=TIMEOUT, killed=True), Exited(PID, "killed by SIGKILL"), S.BACKOFF,
        backoff(1.0, f"{TIMEOUT}; killed by SIGKILL"), killed=False),
    row("STARTING kills on start Timer", rec(S.STARTING), Timer(T), S.STARTING, KILL,
        error=TIMEOUT, killed=True),
    row("STARTING waits on WorkersMissing", rec(S.STARTING, pid=None), WorkersMissing(WORKERS),
        S.STARTING, [AwaitWorkers()], waiting_for=WORKERS, pid=None, timer=T),
    row("STARTING ignores WorkersMissing while waiting", rec(S.STARTING, pid=None,
        waiting_for=("w1",)), WorkersMissing(WORKERS), S.STARTING),
    row("STARTING ignores WorkersMissing with a process", rec(S.STARTING),
        WorkersMissing(WORKERS), S.STARTING),
    row("STARTING launches on WorkersReady with a fresh deadline", rec(S.STARTING, pid=None,
        waiting_for=WORKERS), WorkersReady(), S.STARTING, SPAWN, waiting_for=()),
    row("STARTING ignores WorkersReady when not waiting", rec(S.STARTING), WorkersReady(),
        S.STARTING),
    row("STARTING->BACKOFF on start Timer while waiting", rec(S.STARTING, pid=None,
        waiting_for=WORKERS), Timer(T), S.BACKOFF, [StopWaiting(), *backoff(1.0, NO_WORKERS)],
        waiting_for=(), failures=1, error=NO_WORKERS),
    row("STARTING->STOPPED on Stop while waiting", rec(S.STARTING, pid=None, waiting_for=WORKERS),
        Stop(), S.STOPPED, [StopWaiting()], waiting_for=()),
    row("STARTING->BACKOFF on start Timer before Spawned", rec(S.STARTING, pid=None), Timer(T),
        S.BACKOFF, backoff(1.0, TIMEOUT)),
    row("STARTING->STOPPING on Stop", rec(S.STARTING), Stop(), S.STOPPING, TERM, then=S.STOPPED),
    row("STARTING->STOPPED on Stop before Spawned", rec(S.STARTING, pid=None), Stop(), S.STOPPED),
    row("STARTING ignores Restart (coalesced)", rec(S.STARTING), Restart(), S.STARTING),
    row("STARTING ignores Start", rec(S.STARTING), Start(), S.STARTING),
    row("STARTING ignores stale Timer", rec(S.STARTING), Timer(T - 1), S.STARTING, error=None),
    row("STARTING ignores Exited of other pid", rec(S.STARTING), Exited(OTHER), S.STARTING),
    row("STARTING ignores Ready of other pid", rec(S.STARTING), Ready(OTHER), S.STARTING),
    row("STARTING ignores a plain ProbeFailed", rec(S.STARTING), ProbeFailed(PID), S.STARTING),
    row("STARTING kills on a fatal ProbeFailed", rec(S.STARTING), ProbeFailed(PID, "503", True),
        S.STARTING, KILL, error="unhealthy: 503", killed=True),
    row("STARTING ignores a fatal ProbeFailed once killed", rec(S.STARTING, killed=True),
        ProbeFailed(PID, "503", True), S.STARTING),
    row("STARTING->BACKOFF on Exited after a fatal probe keeps the cause",
        rec(S.STARTING, error="unhealthy: 503", killed=True), Exited(PID, "killed"),
        S.BACKOFF, backoff(1.0, "unhealthy: 503; killed"), killed=False),
    # RUNNING
    row("RUNNING resets probe failures on ProbeOk", rec(S.RUNNING, probe_failures=2), ProbeOk(PID),
        S.RUNNING, probe_failures=0),
    row("RUNNING counts ProbeFailed", rec(S.RUNNING), ProbeFailed(PID), S.RUNNING,
        probe_failures=1),
    row("RUNNING kills at unhealthy_after", rec(S.RUNNING, probe_failures=2),
        ProbeFailed(PID, "timeout"), S.RUNNING, KILL, probe_failures=3, error=UNHEALTHY,
        killed=True),
    row("RUNNING kills past unhealthy_after if not yet killed", rec(S.RUNNING, probe_failures=5),
        ProbeFailed(PID), S.RUNNING, KILL, probe_failures=6, killed=True),
    row("RUNNING does not kill twice", rec(S.RUNNING, probe_failures=3, error=UNHEALTHY,
        killed=True), ProbeFailed(PID, "timeout"), S.RUNNING, probe_failures=4, error=UNHEALTHY),
    row("RUNNING kills on the first fatal ProbeFailed", rec(S.RUNNING),
        ProbeFailed(PID, "503", True), S.RUNNING, KILL, probe_failures=3,
        error="unhealthy: fatal probe (503)", killed=True),
    row("RUNNING does not kill twice on fatal", rec(S.RUNNING, probe_failures=3, killed=True),
        ProbeFailed(PID, "503", True), S.RUNNING, probe_failures=4),
    row("RUNNING ignores ProbeFailed of other pid", rec(S.RUNNING, probe_failures=2),
        ProbeFailed(OTHER), S.RUNNING, probe_failures=2),
    row("RUNNING->STARTING at once on Exited", rec(S.RUNNING, failures=1, probe_failures=1),
        Exited(PID, "exit code 139"), S.STARTING, at_once("exit code 139"),
        pid=None, failures=0, probe_failures=0, restarts=1, error="exit code 139"),
    row("RUNNING->STARTING on Exited after unhealthy kill keeps the cause",
        rec(S.RUNNING, error=UNHEALTHY, killed=True), Exited(PID, "killed by SIGKILL"),
        S.STARTING, at_once(f"{UNHEALTHY}; killed by SIGKILL"), killed=False),
    row("RUNNING->STARTING on Exited without reason", rec(S.RUNNING), Exited(PID), S.STARTING,
        at_once("exited")),
    row("RUNNING->STOPPING on Stop", rec(S.RUNNING), Stop(), S.STOPPING, TERM, then=S.STOPPED),
    row("RUNNING->STOPPING on Restart, not counted", rec(S.RUNNING), Restart(), S.STOPPING, TERM,
        then=S.STARTING, restarts=0),
    row("RUNNING ignores Start", rec(S.RUNNING), Start(), S.RUNNING),
    row("RUNNING ignores the leftover start Timer", rec(S.RUNNING), Timer(T), S.RUNNING),
    row("RUNNING ignores a late WorkersReady", rec(S.RUNNING), WorkersReady(), S.RUNNING),
    # BACKOFF
    row("BACKOFF->STARTING on Timer keeps the error", rec(S.BACKOFF, **DIRTY), Timer(T), S.STARTING,
        SPAWN, failures=2, error="boom"),
    row("BACKOFF ignores stale Timer", rec(S.BACKOFF), Timer(T - 1), S.BACKOFF),
    row("BACKOFF->STARTING on Start", rec(S.BACKOFF, **DIRTY), Start(), S.STARTING, SPAWN, **CLEAN),
    row("BACKOFF->STARTING on Restart", rec(S.BACKOFF, **DIRTY), Restart(), S.STARTING, SPAWN,
        **CLEAN),
    row("BACKOFF->STOPPED on Stop", rec(S.BACKOFF, error="boom"), Stop(), S.STOPPED, error=None),
    row("BACKOFF ignores Exited", rec(S.BACKOFF), Exited(PID), S.BACKOFF),
    row("BACKOFF ignores a late WorkersReady", rec(S.BACKOFF), WorkersReady(), S.BACKOFF),
    # STOPPING
    row("STOPPING->STOPPED on Exited", rec(S.STOPPING, error="x"), Exited(PID), S.STOPPED,
        pid=None, error=None),
    row("STOPPING->STARTING on Exited when restarting", rec(S.STOPPING, then=S.STARTING, **DIRTY),
        Exited(PID), S.STARTING, SPAWN, then=S.STOPPED, failures=0, probe_failures=0, error=None),
    row("STOPPING ignores Exited of other pid", rec(S.STOPPING), Exited(OTHER), S.STOPPING),
    row("STOPPING kills on stop Timer", rec(S.STOPPING), Timer(T), S.STOPPING, KILL, killed=True),
    row("STOPPING ignores stale Timer", rec(S.STOPPING), Timer(T - 1), S.STOPPING),
    row("STOPPING then STARTING on Start", rec(S.STOPPING), Start(), S.STOPPING, then=S.STARTING),
    row("STOPPING then STARTING on Restart", rec(S.STOPPING), Restart(), S.STOPPING,
        then=S.STARTING),
    row("STOPPING then STOPPED on Stop", rec(S.STOPPING, then=S.STARTING), Stop(), S.STOPPING,
        then=S.STOPPED),
    # FAILED
    row("FAILED->STARTING on Start", rec(S.FAILED, **DIRTY), Start(), S.STARTING, SPAWN, **CLEAN),
    row("FAILED->STARTING on Restart", rec(S.FAILED, **DIRTY), Restart(), S.STARTING, SPAWN,
        **CLEAN),
    row("FAILED->STOPPED on Stop", rec(S.FAILED, error="boom"), Stop(), S.STOPPED, error=None),
    row("FAILED ignores Timer", rec(S.FAILED), Timer(T), S.FAILED),
    # IDLE: the gateway's idle timer or an eviction stopped it; otherwise like STOPPED
    row("RUNNING->STOPPING on an idle Stop, then IDLE", rec(S.RUNNING), Stop(idle=True),
        S.STOPPING, TERM, then=S.IDLE),
    row("STOPPING->IDLE on Exited after an idle Stop", rec(S.STOPPING, then=S.IDLE), Exited(PID),
        S.IDLE, pid=None, then=S.STOPPED),
    row("STOPPING then STOPPED on a person's Stop after an idle one", rec(S.STOPPING, then=S.IDLE),
        Stop(), S.STOPPING, then=S.STOPPED),
    row("IDLE->STARTING on Start", rec(S.IDLE, **DIRTY), Start(), S.STARTING, SPAWN, **CLEAN),
    # Where the gateway placed it: a Start sets it, a Restart keeps it, a busy start too.
    row("Start places", rec(S.IDLE, device="CUDA0"), Start("CUDA1"), S.STARTING, SPAWN,
        device="CUDA1"),
    row("admin Start unplaces", rec(S.STOPPED, device="CUDA1"), Start(), S.STARTING, SPAWN,
        device=None),
    row("Restart keeps the place", rec(S.STOPPED, device="CUDA1"), Restart(), S.STARTING,
        SPAWN, device="CUDA1"),
    row("STARTING keeps its place", rec(S.STARTING, device="CUDA1"), Start("CUDA0"),
        S.STARTING, device="CUDA1"),
    row("STOPPING takes the next place", rec(S.STOPPING), Start("CUDA1"), S.STOPPING,
        then=S.STARTING, device="CUDA1"),
    row("crash restart keeps the place", rec(S.RUNNING, device="CUDA1"), Exited(PID, "boom"),
        S.STARTING, at_once("boom"), device="CUDA1"),
    row("IDLE->STOPPED on a person's Stop", rec(S.IDLE), Stop(), S.STOPPED),
    row("IDLE ignores an idle Stop", rec(S.IDLE), Stop(idle=True), S.IDLE),
    # An eviction of a model still loading (or waiting to retry) ends IDLE, not as if a
    # person had stopped it.
    row("STARTING->STOPPING on an idle Stop, then IDLE", rec(S.STARTING), Stop(idle=True),
        S.STOPPING, TERM, then=S.IDLE),
    row("STARTING->IDLE on an idle Stop before Spawned", rec(S.STARTING, pid=None),
        Stop(idle=True), S.IDLE),
    row("BACKOFF->IDLE on an idle Stop", rec(S.BACKOFF, error="boom"), Stop(idle=True), S.IDLE,
        error=None),
    row("STOPPING then IDLE on an idle Stop after a restart", rec(S.STOPPING, then=S.STARTING),
        Stop(idle=True), S.STOPPING, then=S.IDLE),
    row("STOPPING stays STOPPED-bound on an idle Stop after a person's",
        rec(S.STOPPING, then=S.STOPPED), Stop(idle=True), S.STOPPING, then=S.STOPPED),
]  # fmt: skip


@pytest.mark.parametrize(("given", "event", "state", "actions", "fields"), TABLE)
def test_transition(
    given: Record, event: Event, state: State, actions: list[Action], fields: dict[str, Any]
) -> None:
    got, acts = step(given, event, NOW, K)
    assert (got.state, acts) == (state, actions)
    assert {name: getattr(got, name) for name in fields} == fields


# Sequences -----------------------------------------------------------------

TICK = Timer(-1)  # placeholder: `drive` fires whatever timer is currently armed
Script = list[tuple[float, Event]]


def drive(
    script: Script, knobs: Knobs = K, given: Record | None = None
) -> tuple[Record, list[Action]]:
    """Feed (now, event) pairs through `step`; return the final record and every action."""
    r, actions = given or Record(), []
    for now, event in script:
        r, acts = step(r, Timer(r.timer) if event == TICK else event, now, knobs)
        actions += acts
    return r, actions


def crash_while_starting(pid: int, now: float) -> Script:
    return [(now, Spawned(pid)), (now, Exited(pid, "exit code 1")), (now, TICK)]


def crash_after_ready(pid: int, now: float) -> Script:
    return [(now, Spawned(pid)), (now, Ready(pid)), (now, Exited(pid, "exit code 1"))]


def test_flap_guard_fails_after_max_restarts_and_start_clears_it() -> None:
    knobs = replace(K, max_restarts=2)
    script = [(0.0, Start()), *crash_while_starting(1, 1.0), *crash_while_starting(2, 2.0)]
    r, actions = drive([*script, (3.0, Spawned(3)), (3.0, Exited(3, "exit code 1"))], knobs)
    assert (r.state, r.pid, r.restarts, actions.count(Spawn())) == (S.FAILED, None, 2, 3)
    assert r.error == "exit code 1; gave up after 2 restarts in 100s"
    assert actions[-1] == Failed(r.error)

    r, actions = drive([(4.0, Start())], knobs, given=r)
    assert (r.state, r.error, r.restart_times, r.restarts) == (S.STARTING, None, (), 2)
    assert actions == [Spawn(), Arm(r.timer, 30.0)]


@pytest.mark.parametrize(
    ("third_crash", "state"), [(109.9, S.FAILED), (110.0, S.STARTING)], ids=["kept", "forgotten"]
)
def test_flap_guard_forgets_restarts_older_than_window(third_crash: float, state: State) -> None:
    knobs = replace(K, max_restarts=2)
    script = [(0.0, Start()), *crash_after_ready(1, 10.0), *crash_after_ready(2, 60.0)]
    r, _ = drive(script + crash_after_ready(3, third_crash), knobs)
    assert r.state == state
    if state == S.STARTING:
        assert r.restart_times == (60.0, third_crash)


@pytest.mark.parametrize(
    ("failures", "delay"), [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 8.0), (5000, 8.0)]
)
def test_backoff_doubles_up_to_max(failures: int, delay: float) -> None:
    _, actions = step(rec(S.STARTING, failures=failures), Exited(PID), NOW, K)
    assert actions == backoff(delay, "exited while starting")


@pytest.mark.parametrize(("jitter", "delay"), [(1.0, 1.5), (-1.0, 0.5), (0.0, 1.0), (3.0, 1.5)])
def test_backoff_jitter_scales_delay_within_bounds(jitter: float, delay: float) -> None:
    knobs = replace(K, backoff_jitter=0.5)
    _, actions = step(rec(S.STARTING), Exited(PID), NOW, knobs, jitter=jitter)
    assert actions == backoff(delay, "exited while starting")


def test_kill_emitted_exactly_once_at_unhealthy_after() -> None:
    running = rec(S.RUNNING)
    script: Script = [(NOW, ProbeFailed(PID, "timeout"))] * 6
    r, actions = drive(script, given=running)
    assert (actions, r.probe_failures, r.error) == (KILL, 6, UNHEALTHY)


def test_probe_ok_in_between_keeps_instance_alive() -> None:
    fail, ok = (NOW, ProbeFailed(PID)), (NOW, ProbeOk(PID))
    r, actions = drive([fail, fail, ok, fail, fail], given=rec(S.RUNNING))
    assert (r.state, actions, r.probe_failures) == (S.RUNNING, [], 2)


def test_admin_restart_does_not_count_but_crash_does() -> None:
    script: Script = [(0.0, Start()), (0.0, Spawned(1)), (0.0, Ready(1)), (1.0, Restart())]
    r, _ = drive([*script, (1.0, Exited(1)), *crash_after_ready(2, 2.0)])
    assert (r.state, r.restarts, r.restart_times) == (S.STARTING, 1, (2.0,))


def test_hung_server_is_killed_when_unhealthy_after_is_lowered_mid_streak() -> None:
    fail = (NOW, ProbeFailed(PID, "timeout"))
    r, actions = drive([fail, fail], given=rec(S.RUNNING))  # 2 of 3: not yet
    assert actions == []
    r, actions = drive([fail], replace(K, unhealthy_after=1), given=r)
    assert (actions, r.probe_failures, r.killed) == (KILL, 3, True)
    r, actions = drive([fail], replace(K, unhealthy_after=1), given=r)
    assert actions == []  # one kill; the Exited it causes does the restart


def test_start_deadline_stays_the_reason_when_start_timeout_changes_before_the_exit() -> None:
    r, actions = drive([(NOW, TICK)], given=rec(S.STARTING))
    assert actions == KILL
    r, actions = drive([(NOW, Exited(PID, "killed by SIGKILL"))], replace(K, start_timeout=5.0), r)
    assert actions == backoff(1.0, f"{TIMEOUT}; killed by SIGKILL")


def test_workers_that_never_come_end_in_failed_by_the_flap_guard() -> None:
    knobs = replace(K, max_restarts=2)
    wait: Script = [(NOW, WorkersMissing(WORKERS)), (NOW, TICK)]  # deadline passes waiting
    r, actions = drive([(NOW, Start()), *wait, (NOW, TICK), *wait, (NOW, TICK), *wait], knobs)
    assert (r.state, r.pid, r.waiting_for) == (S.FAILED, None, ())
    assert actions.count(AwaitWorkers()) == actions.count(StopWaiting()) == 3
    assert r.error == f"{NO_WORKERS}; gave up after 2 restarts in 100s"


def test_head_waits_then_loads_with_a_full_start_deadline() -> None:
    script: Script = [(NOW, Start()), (NOW, WorkersMissing(WORKERS)), (NOW + 20, WorkersReady())]
    r, actions = drive(script)
    assert actions[-2:] == [Spawn(), Arm(r.timer, 30.0)]
    r, _ = drive([(NOW + 20, Spawned(5)), (NOW + 45, Ready(5))], given=r)
    assert (r.state, r.error) == (S.RUNNING, None)
