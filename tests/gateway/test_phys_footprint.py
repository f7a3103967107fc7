"""A child's footprint on macOS (`proc_pid_rusage`'s `phys_footprint`) through a stand-in
for the system call, and footprints taken within a deadline, never a stalled ticker."""

from __future__ import annotations

import asyncio
import ctypes
import sys
import threading
import time

import pytest
from supervisor_double import Double, gateway, spec, until

from llamad.gateway.admission.idle import IdleTimers
from llamad.gateway.admission.measuring import Measurer
from llamad.gateway.admission.memory import Footprint, Held, footprint, returned
from llamad.gateway.admission.phys_footprint import (
    PROC_PID_RUSAGE,
    RUSAGE_INFO_V2,
    PhysFootprint,
    RusageFn,
    RusageInfoV2,
    libproc,
)
from llamad.lifecycle.states import State

MiB = 1024**2
GiB = 1024**3


def test_the_struct_is_laid_out_as_sys_resource_h() -> None:
    # 16 bytes of uuid, then 18 uint64 fields; phys_footprint is the eighth of them.
    assert ctypes.sizeof(RusageInfoV2) == 16 + 18 * 8
    assert RusageInfoV2.ri_phys_footprint.offset == 16 + 7 * 8  # type: ignore[attr-defined]


def test_it_reads_phys_footprint_through_proc_pid_rusage() -> None:
    calls: list[tuple[int, int]] = []

    def fake(pid: int, flavor: int, buffer: int | None) -> int:
        calls.append((pid, flavor))
        if pid == 4242:
            return -1  # ESRCH: gone
        info = ctypes.cast(buffer, ctypes.POINTER(RusageInfoV2)).contents
        info.ri_resident_size = 900 * MiB  # what RSS would say; not the figure we keep
        info.ri_phys_footprint = 700 * MiB
        return 0

    callback = PROC_PID_RUSAGE(fake)
    loads: list[int] = []

    def load() -> RusageFn:
        loads.append(1)
        fn: RusageFn = callback
        return fn

    reader = PhysFootprint(load)
    assert reader.read(1234) == 700 * MiB
    assert reader.read(4242) is None
    assert calls == [(1234, RUSAGE_INFO_V2), (4242, RUSAGE_INFO_V2)]
    assert loads == [1]  # the library is looked up once


def test_on_a_mac_the_footprint_is_phys_footprint_and_all_of_it_comes_back() -> None:
    def fake(pid: int, flavor: int, buffer: int | None) -> int:
        ctypes.cast(buffer, ctypes.POINTER(RusageInfoV2)).contents.ri_phys_footprint = 3 * GiB
        return 0

    callback = PROC_PID_RUSAGE(fake)
    reader = PhysFootprint(lambda: callback)
    size = footprint(1234, "darwin", reader)
    assert size == 3 * GiB
    assert isinstance(size, Footprint)
    assert size.anon is None  # no split on a Mac: its pages are wired, all of them
    assert returned(Held(size, measured=True, holding=True), linux=False) == 3 * GiB
    assert footprint(None, "darwin", reader) is None


def test_without_the_call_there_is_no_measurement() -> None:
    tries: list[int] = []

    def missing() -> RusageFn:
        tries.append(1)
        raise OSError("libSystem.B.dylib: cannot open shared object file")

    reader = PhysFootprint(missing)
    assert reader.read(1) is None
    assert reader.read(1) is None
    assert tries == [1]


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS the library is not there")
def test_the_system_loader_off_macos_says_no_measurement() -> None:
    with pytest.raises(OSError, match="libSystem"):
        libproc()
    assert PhysFootprint().read(1) is None


async def test_a_reading_that_does_not_come_is_no_measurement() -> None:
    gate, calls = threading.Event(), []

    def stuck(pid: int | None) -> int | None:
        calls.append(pid)
        gate.wait(10)
        return 5 * MiB

    measurer = Measurer(stuck, deadline=0.2)
    t0 = time.monotonic()
    assert await measurer.sizes({"a": 1}) == {}
    assert time.monotonic() - t0 < 2
    # Still stuck: no second thread is started behind it, and the answer is at once.
    t0 = time.monotonic()
    assert await measurer.sizes({"a": 1}) == {}
    assert time.monotonic() - t0 < 0.1
    assert calls == [1]
    gate.set()
    deadline = time.monotonic() + 5
    while (found := await measurer.sizes({"a": 1})) == {}:
        assert time.monotonic() < deadline, "readings never came back"
        await asyncio.sleep(0.05)
    assert found == {"a": 5 * MiB}


async def test_a_reader_that_fails_is_no_measurement() -> None:
    def broken(pid: int | None) -> int | None:
        raise ValueError("a bug")

    assert await Measurer(broken, deadline=2).sizes({"a": 1}) == {}
    assert await Measurer(lambda pid: pid, deadline=2).sizes({"a": 7, "b": None}) == {
        "a": 7,
        "b": None,
    }


async def test_a_stuck_reading_never_stalls_the_idle_ticker() -> None:
    gate = threading.Event()

    def stuck(pid: int | None) -> int | None:
        gate.wait(10)
        return None

    double = Double()
    double.add(spec("a", idle_timeout=0.2), State.RUNNING)
    gw = gateway(double)
    timers = IdleTimers(gw.sched, Measurer(stuck, deadline=0.1))
    try:
        async with asyncio.TaskGroup() as tg:
            ticker = tg.create_task(timers.run())
            await until(lambda: bool(double.stops()), "the idle stop, footprints stuck", 10)
            ticker.cancel()
    finally:
        gate.set()
    assert double.stops() == [("a", "Stop(idle=True)", 0)]
