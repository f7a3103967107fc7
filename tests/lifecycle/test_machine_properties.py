"""Properties of `machine.step` under any sequence of events a faithful executor can deliver.

The executor model mirrors `supervise.instance.Instance`: a Spawn is answered at once
(Spawned, SpawnFailed or WorkersMissing), a process exits at most once, and timers,
probes, commands and stale events may arrive in any order.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from test_machine import TABLE

from llamad.lifecycle.actions import Action, Arm, AwaitWorkers, Signal, Spawn, StopWaiting
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

NO_PID = (State.STOPPED, State.BACKOFF, State.FAILED)
# (state, event type) pairs the table shows doing something; every other pair is a no-op.
ACTING = {(p.values[0].state, type(p.values[1])) for p in TABLE if " ignores " not in (p.id or "")}


class Lifecycle(RuleBasedStateMachine):
    """Drives one record through `step` and checks the invariants after every event."""

    @initialize(
        knobs=st.builds(
            Knobs,
            unhealthy_after=st.integers(1, 4),
            max_restarts=st.integers(1, 4),
            restart_window=st.floats(1.0, 100.0),
        )
    )
    def setup(self, knobs: Knobs) -> None:
        self.knobs = knobs
        self.rec = Record()
        self.now = 0.0
        self.next_pid = 100
        self.alive: set[int] = set()  # launched and not yet reported Exited
        self.spawn_due = False  # a Spawn action awaits its answer
        self.waiting = False  # AwaitWorkers given, StopWaiting not yet
        self.tokens: list[int] = []

    def feed(self, event: Event) -> None:
        before = self.rec
        self.rec, actions = step(before, event, self.now, self.knobs, 0.0)
        self.check_step(before, event, actions)
        for action in actions:
            self.carry_out(action)

    def check_step(self, before: Record, event: Event, actions: list[Action]) -> None:
        assert self.rec.timer >= before.timer, "the timer token only grows"
        if (before.state, type(event)) not in ACTING:
            assert (self.rec, actions) == (before, []), f"{before.state} + {event} acted"
        assert sum(isinstance(a, Spawn) for a in actions) <= 1
        r = self.rec
        if isinstance(event, ProbeFailed) and event.pid == r.pid and r.state is State.RUNNING:
            # A hung server is killed whatever unhealthy_after was when the streak began.
            assert r.killed or r.probe_failures < self.knobs.unhealthy_after

    def carry_out(self, action: Action) -> None:
        match action:
            case Spawn():
                assert not self.spawn_due, "a second Spawn before the first was answered"
                assert not self.alive, "a Spawn while a process of ours still runs"
                self.spawn_due = True
            case Arm(token=token):
                assert not self.tokens or token > self.tokens[-1]
                self.tokens.append(token)
            case AwaitWorkers():
                self.waiting = True
            case StopWaiting():
                assert self.waiting, "StopWaiting without AwaitWorkers"
                self.waiting = False
            case Signal():
                assert self.alive, "a signal with no process to receive it"

    # The answer to a Spawn comes before anything else, as in Instance._spawn.

    @precondition(lambda self: self.spawn_due)
    @rule()
    def spawned(self) -> None:
        self.spawn_due, pid = False, self.next_pid
        self.next_pid += 1
        self.alive.add(pid)
        self.feed(Spawned(pid))

    @precondition(lambda self: self.spawn_due)
    @rule(reason=st.sampled_from(["port taken", "no model"]))
    def spawn_failed(self, reason: str) -> None:
        self.spawn_due = False
        self.feed(SpawnFailed(reason))

    @precondition(lambda self: self.spawn_due)
    @rule(names=st.sampled_from([("w1",), ("w1", "peer/w2")]))
    def workers_missing(self, names: tuple[str, ...]) -> None:
        self.spawn_due = False
        self.feed(WorkersMissing(names))

    # Everything else, in any order.

    @precondition(lambda self: not self.spawn_due)
    @rule(command=st.sampled_from([Start(), Stop(), Restart()]))
    def command(self, command: Start | Stop | Restart) -> None:
        self.feed(command)

    @precondition(lambda self: not self.spawn_due)
    @rule(advance=st.floats(0.0, 50.0), stale=st.booleans())
    def timer(self, advance: float, stale: bool) -> None:
        self.now += advance
        self.feed(Timer(self.rec.timer - 1 if stale else self.rec.timer))

    @precondition(lambda self: not self.spawn_due and self.waiting)
    @rule()
    def workers_ready(self) -> None:
        self.waiting = False  # the waiter delivers once and ends
        self.feed(WorkersReady())

    @precondition(lambda self: not self.spawn_due and bool(self.alive))
    @rule(data=st.data())
    def exited(self, data: st.DataObject) -> None:
        pid = data.draw(st.sampled_from(sorted(self.alive)))
        self.alive.discard(pid)
        self.feed(Exited(pid, "exit code 1"))

    @precondition(lambda self: not self.spawn_due and self.rec.pid is not None)
    @rule()
    def ready(self) -> None:
        assert self.rec.pid is not None
        self.feed(Ready(self.rec.pid))

    @precondition(lambda self: not self.spawn_due and self.rec.pid is not None)
    @rule()
    def probe_failed(self) -> None:
        assert self.rec.pid is not None
        self.feed(ProbeFailed(self.rec.pid, "timeout"))

    @precondition(lambda self: not self.spawn_due and self.rec.pid is not None)
    @rule()
    def probe_ok(self) -> None:
        assert self.rec.pid is not None
        self.feed(ProbeOk(self.rec.pid))

    @precondition(lambda self: not self.spawn_due)
    @rule(kind=st.sampled_from([Ready, ProbeOk, ProbeFailed]))
    def stale_probe(self, kind: type[Ready | ProbeOk | ProbeFailed]) -> None:
        self.feed(kind(1))  # a process long gone

    @rule(unhealthy_after=st.integers(1, 4))
    def reload_knobs(self, unhealthy_after: int) -> None:
        # A reload may change any knob between two events, mid-streak included.
        self.knobs = replace(self.knobs, unhealthy_after=unhealthy_after)

    @invariant()
    def no_pid_without_a_process_state(self) -> None:
        if self.rec.state in NO_PID:
            assert self.rec.pid is None
            assert self.rec.waiting_for == ()

    @invariant()
    def waiting_only_while_starting_without_a_process(self) -> None:
        if self.rec.waiting_for:
            assert (self.rec.state, self.rec.pid) == (State.STARTING, None)
        assert bool(self.rec.waiting_for) == self.waiting


TestLifecycle = Lifecycle.TestCase
TestLifecycle.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)


def test_the_table_covers_every_state() -> None:
    assert {state for state, _ in ACTING} == set(State)
