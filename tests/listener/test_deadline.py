"""listener.deadline: one timer for a deadline moved at every turn, and never late."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import uvloop

from llamad.common.deadline import Deadline


class Clock:
    """A loop stand-in with a hand-moved clock and the timers set on it, by time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, asyncio.TimerHandle]] = []
        self.made = 0

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: object) -> asyncio.TimerHandle:
        self.made += 1
        handle = asyncio.TimerHandle(when, callback, (), asyncio.get_running_loop())  # type: ignore[arg-type]
        self.timers.append((when, handle))
        return handle

    def run_until(self, t: float) -> None:
        """Move the clock to `t`, firing each live timer due by then, in time order."""
        while live := sorted((w, h) for w, h in self.timers if w <= t and not h.cancelled()):
            when, handle = live[0]
            self.timers.remove((when, handle))
            self.now = when
            handle._run()
        self.now = t


async def test_a_deadline_moved_later_at_every_turn_keeps_one_timer() -> None:
    clock, fired = Clock(), []
    d = Deadline(clock, lambda: fired.append(clock.now))  # type: ignore[arg-type]
    for _ in range(100):  # a request a second: head, body, then the idle wait
        d.set(5.0)
        d.set(60.0)
        d.clear()
        d.set(5.0)
        clock.run_until(clock.now + 1.0)
    # One timer at first, then one each time it fires early: every 4 s (5 s after a set
    # that comes each second), not 300 made and cancelled.
    assert clock.made <= 1 + 100 // 4
    assert fired == []
    clock.run_until(clock.now + 10)
    assert fired == [clock.now - 10 + 4.0]  # 5 s after the last set, 1 s of which passed


async def test_a_sooner_deadline_moves_the_timer_and_fires_on_time() -> None:
    clock, fired = Clock(), []
    d = Deadline(clock, lambda: fired.append(clock.now))  # type: ignore[arg-type]
    d.set(60.0)
    d.set(5.0)
    assert d.due == 105.0
    clock.run_until(200.0)
    assert fired == [105.0]
    assert d.due is None


async def test_a_cleared_or_cancelled_deadline_never_fires() -> None:
    clock, fired = Clock(), []
    d = Deadline(clock, lambda: fired.append(clock.now))  # type: ignore[arg-type]
    d.set(1.0)
    d.clear()
    clock.run_until(110.0)
    d.set(1.0)
    d.cancel()
    assert all(h.cancelled() for _, h in clock.timers)
    clock.run_until(200.0)
    assert fired == []


async def test_on_a_real_loop_it_fires_once_when_due() -> None:
    loop = asyncio.get_running_loop()
    fired = loop.create_future()
    d = Deadline(loop, lambda: fired.set_result(loop.time()))
    d.set(0.05)
    d.set(0.2)  # later: the first timer fires early and is set again
    began = loop.time()
    at = await asyncio.wait_for(fired, 5)
    assert at - began >= 0.15
    assert d.due is None


class Counting:
    """A loop, counting the timers set on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.timers = loop, 0

    def time(self) -> float:
        return self.loop.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        self.timers += 1
        return self.loop.call_at(when, callback)


def test_on_uvloop_a_deadline_is_reached_without_spinning() -> None:
    """uvloop keeps time in whole milliseconds and rounds a timer's delay to them: a
    timer that fires a fraction of a millisecond before its deadline must not be set
    again at once, turn after turn, until the clock ticks."""
    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(_forty_deadlines(loop))
    finally:
        loop.close()


async def _forty_deadlines(loop: asyncio.AbstractEventLoop) -> None:
    counting, fired, done = Counting(loop), [], asyncio.Event()

    def due(i: int) -> None:
        fired.append(i)
        if len(fired) == 40:
            done.set()

    deadlines = [Deadline(counting, functools.partial(due, i)) for i in range(40)]  # type: ignore[arg-type]
    for i, deadline in enumerate(deadlines):
        deadline.set(0.01 + i * 0.000137)  # most fall between two milliseconds
    await asyncio.wait_for(done.wait(), 5)
    assert sorted(fired) == list(range(40))
    assert counting.timers <= 45, f"{counting.timers} timers set for 40 deadlines"
