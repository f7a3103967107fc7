"""first_of: the first of several waits to end wins; the rest are cancelled and ended."""

from __future__ import annotations

import asyncio

import pytest

from llamad.common.waits import first_of


class Held:
    """A wait that ends when its event is set, and notes how it ended."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.started = False
        self.ended: str | None = None

    async def wait(self) -> str:
        self.started = True
        try:
            await self.event.wait()
        except asyncio.CancelledError:
            self.ended = "cancelled"
            raise
        self.ended = "set"
        return "set"


async def test_the_first_to_end_wins_and_the_others_have_ended_when_it_returns() -> None:
    a, b, c = Held(), Held(), Held()
    b.event.set()
    assert await first_of(a.wait(), b.wait(), c.wait()) == 1
    assert (a.ended, b.ended, c.ended) == ("cancelled", "set", "cancelled")


async def test_several_ending_in_one_step_give_the_lowest_index() -> None:
    a, b = Held(), Held()
    a.event.set()
    b.event.set()
    assert await first_of(b.wait(), a.wait()) == 0


async def test_the_first_ones_exception_is_raised_and_the_others_cancelled() -> None:
    other = Held()

    async def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await first_of(other.wait(), fails())
    assert other.ended == "cancelled"


async def test_cancelling_the_caller_cancels_every_wait_and_goes_on() -> None:
    a, b = Held(), Held()
    caller = asyncio.ensure_future(first_of(a.wait(), b.wait()))
    while not (a.started and b.started):  # noqa: ASYNC110
        await asyncio.sleep(0)  # one loop step at a time, until both waits have begun
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert (a.ended, b.ended) == ("cancelled", "cancelled")


async def test_a_timeout_around_it_ends_it_as_a_timeout() -> None:
    a = Held()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await first_of(a.wait(), asyncio.Event().wait())
    assert a.ended == "cancelled"


async def test_a_task_watched_through_asyncio_wait_is_not_cancelled() -> None:
    owned = asyncio.ensure_future(asyncio.Event().wait())
    bound = asyncio.Event()
    bound.set()
    assert await first_of(bound.wait(), asyncio.wait([owned])) == 0
    assert not owned.done()
    owned.cancel()
    await asyncio.gather(owned, return_exceptions=True)


async def test_a_task_watched_through_asyncio_wait_wins_when_it_ends() -> None:
    async def ends() -> None:
        return None

    owned = asyncio.ensure_future(ends())
    assert await first_of(asyncio.Event().wait(), asyncio.wait([owned])) == 1
