"""A Mac that stays up for its clients: `caffeinate` held while the gateway has requests,
released a while after the last, never per request, and not at all when turned off."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from helpers import until
from stand_ins import install_caffeinate

from llamad.daemon.keep_awake import KeepAwake

# Each test but the last runs the stand-in, some from a task of their own: the fast
# layer's skip at a spawn would land in that task, not the test.
process = pytest.mark.process


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    record = install_caffeinate(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


def said(record: Path) -> list[str]:
    return [line.split()[0] for line in record.read_text().splitlines()]


def first_args(record: Path) -> list[str]:
    return record.read_text().splitlines()[0].split()[2:]


@process
async def test_held_while_busy_and_released_after_the_linger(record: Path) -> None:
    requests, clock = [0], Clock()
    awake = KeepAwake(lambda: requests[0], lambda: True, linger=30, clock=clock)
    await awake.step()
    assert awake.proc is None  # idle: nothing held
    requests[0] = 2
    await awake.step()
    await until(lambda: said(record) == ["start"], 10, "caffeinate started")
    assert first_args(record) == ["-i", "-w", str(os.getpid())]
    assert awake.status()["held"] is True
    for _ in range(3):  # request after request, and gaps shorter than the linger
        requests[0] = 0
        clock.now += 20
        await awake.step()
        requests[0] = 1
        await awake.step()
    requests[0] = 0
    clock.now += 29
    await awake.step()
    assert said(record) == ["start"]  # started once for the whole burst
    clock.now += 1
    await awake.step()
    assert said(record) == ["start", "stop"]
    assert awake.status() == {
        "enabled": True,
        "available": True,
        "held": False,
        "pid": None,
        "held_s": None,
        "error": None,
    }


@process
async def test_turned_off_it_holds_nothing_and_lets_go(record: Path) -> None:
    enabled = [True]
    awake = KeepAwake(lambda: 1, lambda: enabled[0])
    await awake.step()
    await until(lambda: said(record) == ["start"], 10, "caffeinate started")
    enabled[0] = False  # a reload turned keep_awake off: released at once, busy or not
    await awake.step()
    await awake.step()
    assert said(record) == ["start", "stop"]
    assert awake.status()["enabled"] is False


@process
async def test_its_end_releases_the_assertion(record: Path) -> None:
    stop = asyncio.Event()
    awake = KeepAwake(lambda: 1, lambda: True, tick=0.05)
    running = asyncio.create_task(awake.run(stop))
    await until(lambda: said(record) == ["start"], 10, "caffeinate started")
    stop.set()
    await asyncio.wait_for(running, 10)
    assert said(record) == ["start", "stop"]


async def test_without_caffeinate_nothing_happens() -> None:
    awake = KeepAwake(lambda: 1, lambda: True, which=lambda name: None)
    await awake.step()
    assert awake.proc is None
    assert awake.status()["available"] is False


@process
async def test_a_caffeinate_that_exits_is_reported_not_run_every_second() -> None:
    clock = Clock()
    awake = KeepAwake(lambda: 1, lambda: True, which=lambda name: "/bin/false", clock=clock)
    await awake.step()
    first = awake.proc
    assert first is not None
    await first.wait()
    for _ in range(3):
        clock.now += 1
        await awake.step()
    assert awake.proc is first  # run once for this busy spell
    assert awake.status()["held"] is False
    assert awake.status()["error"] == "caffeinate exited with code 1"
