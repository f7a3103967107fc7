"""Memory on a Mac, as tables: 16, 36 and 128 GB Macs with two and three models, with and
without a measurement. A loaded model's pages are wired for Metal, so they are already
missing from the available memory: the budget adds back exactly what the ledger counts,
and no model is counted twice.

Each row goes through the ledger (`Ledger.budgets`, the one place a budget is decided),
with the machine's reading handed in, then `room.plan` decides the evictions.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from supervisor_double import Double, spec

from llamad.backends.devices.metal import working_set
from llamad.backends.devices.probe import Machine
from llamad.backends.devices.readings import Device, list_devices
from llamad.backends.tool import ServerCommand
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission.devices.book import DeviceBook
from llamad.gateway.admission.devices.ledger import Ledger
from llamad.gateway.admission.devices.placement import RAM
from llamad.gateway.admission.memory import (
    Footprint,
    RamReading,
    margin,
    total_for,
)
from llamad.gateway.admission.room import Loaded, plan
from llamad.gateway.admission.slots import Slots
from llamad.lifecycle.states import State

GiB = 1024**3
MiB = 1024**2


def mac(ram_gib: int, available: float) -> RamReading:
    """An Apple silicon Mac with `ram_gib` of RAM and `available` GiB available now."""
    return RamReading(int(available * GiB), ram_gib * GiB, None, False, True)


def ledger(
    double: Double, slots: Slots, reading: RamReading, devices: tuple[Device, ...] = ()
) -> Ledger:
    """The gateway's ledger over `double`, on a machine that reads `reading` and whose
    llama-server lists `devices` (the Metal line, on a Mac)."""

    async def listed(server: ServerCommand) -> Machine:
        return Machine(devices)

    book = DeviceBook(lambda: ServerCommand(Path("llama-server")), listed)
    asyncio.run(book.discover(lambda machine: {}))
    settings = GatewayConfig(host="127.0.0.1", port=0, memory_budget="auto")
    return Ledger(double, slots, lambda: settings, book, lambda: reading)


# ram GiB, available before any model (GiB), the working set llama-server lists (MiB; None:
# no listing, the fixed share), the loaded models (GiB, least recently used first), the
# new model (GiB), the models evicted for it with and without a measurement.
ROWS = [
    # The issue's row: 26 GiB available before any model; a 10 GiB model loads beside
    # a 12 GiB one (the room seen was 0.6 GiB, so the 12 GiB one was evicted).
    pytest.param(36, 26, None, [12], 10, [], id="36GB two models: 10 beside 12"),
    pytest.param(36, 26, 27648, [12], 10, [], id="36GB listed working set"),
    pytest.param(36, 26, None, [8, 6], 7, [], id="36GB three models"),
    # Too much is still too much: the least recently used goes.
    pytest.param(36, 26, None, [12], 14, ["m0"], id="36GB 14 beside 12 does not fit"),
    pytest.param(36, 26, None, [8, 6], 10, ["m0"], id="36GB three: evicts one"),
    pytest.param(16, 10, None, [4], 4, [], id="16GB two models"),
    pytest.param(16, 10, None, [3, 3], 3, [], id="16GB three models"),
    pytest.param(16, 10, None, [4, 4], 4, ["m0"], id="16GB three: evicts one"),
    # The working set binds before the free memory does: 2/3 of 16 GiB is 10.7 GiB.
    pytest.param(16, 14, None, [6], 5, ["m0"], id="16GB working set binds"),
    pytest.param(16, 14, 13312, [6], 5, [], id="16GB wired limit raised"),
    pytest.param(128, 110, None, [40], 40, [], id="128GB two models"),
    pytest.param(128, 110, None, [40, 30], 20, [], id="128GB three models"),
    pytest.param(128, 110, None, [40, 30], 30, ["m0"], id="128GB three: evicts one"),
    pytest.param(128, 110, 112640, [40, 30], 30, [], id="128GB wired limit raised"),
]


def _loaded(double: Double, slots: Slots, sizes: list[int], measured: bool) -> list[Loaded]:
    out = []
    for i, size in enumerate(sizes):
        name = f"m{i}"
        double.add(dataclasses.replace(spec(name), memory_estimate=size * GiB), State.RUNNING)
        if measured:
            slots.slot(name).measured = Footprint(size * GiB)  # phys_footprint: no split
        out.append(Loaded(name, size * GiB, True, False, float(i)))
    return out


@pytest.mark.parametrize("measured", [False, True], ids=["estimated", "measured"])
@pytest.mark.parametrize(("ram", "before", "listed", "sizes", "need", "evicted"), ROWS)
def test_a_mac_counts_each_model_once(
    ram: int,
    before: float,
    listed: int | None,
    sizes: list[int],
    need: int,
    evicted: list[str],
    measured: bool,
) -> None:
    double, slots = Double(), Slots()
    loaded = _loaded(double, slots, sizes, measured)
    # The loaded models' pages are wired: gone from the available memory.
    reading = mac(ram, before - sum(sizes))
    devices = () if listed is None else (Device("MTL0", "Apple M", listed * MiB, listed * MiB),)
    budget = ledger(double, slots, reading, devices).budgets(m.name for m in loaded)[RAM]
    assert budget is not None
    # The budget is what there is with none of our models: the same, measured or not.
    cap = working_set(ram * GiB, None if listed is None else listed * MiB, True)
    assert cap is not None
    whole = min(int(before * GiB), cap)
    assert budget == whole - margin(whole)
    assert plan(need * GiB, loaded, 0, budget) == evicted


def test_the_issue_row_sees_the_room_there_is() -> None:
    """36 GB Mac, 26 GiB available before any model, a 12 GiB model loaded and never
    measured: the room left is the working set's 24 GiB less the margin and the model
    (10 GiB), where it was 0.6 GiB when the estimate was counted beside the free memory
    that already lacked it."""
    double, slots = Double(), Slots()
    _loaded(double, slots, [12], measured=False)
    budget = ledger(double, slots, mac(36, 14)).budgets(["m0"])[RAM]
    assert budget is not None
    assert (budget - 12 * GiB) / GiB == pytest.approx(10.0)


def test_a_model_still_loading_gives_nothing_back() -> None:
    """While it loads its pages are not wired yet: adding its estimate back would let a
    second load take the room the first is about to fill."""
    double, slots = Double(), Slots()
    _loaded(double, slots, [12], measured=False)
    double.move("m0", State.STARTING)
    budget = ledger(double, slots, mac(36, 26)).budgets(["m0"])[RAM]
    assert budget == 24 * GiB - margin(24 * GiB)
    double.move("m0", State.BACKOFF)  # crashed, waiting to start again: holds nothing
    assert ledger(double, slots, mac(36, 20)).budgets(["m0"])[RAM] == 20 * GiB - 2 * GiB


def test_linux_adds_back_only_what_memavailable_lacks() -> None:
    reading = RamReading(20 * GiB, 64 * GiB, None, True, False)
    double, slots = Double(), Slots()
    _loaded(double, slots, [8], measured=False)
    # An estimate on Linux: its mmapped weights are page cache MemAvailable still counts.
    assert ledger(double, slots, reading).budgets(["m0"])[RAM] == 18 * GiB
    slots.slot("m0").measured = Footprint(8 * GiB, anon=3 * GiB)
    assert ledger(double, slots, reading).budgets(["m0"])[RAM] == 21 * GiB
    assert total_for(20 * GiB, None, [], True) == 20 * GiB


def test_the_metal_line_of_the_device_list_is_the_working_set() -> None:
    """`llama-server --list-devices` on a 36 GB Mac whose wired limit is 30 GiB: that
    figure, not the 2/3 share (24 GiB), caps the budget."""
    listing = "Available devices:\n  MTL0: Apple M3 Pro (30720 MiB, 30719 MiB free)\n"
    (metal,) = list_devices(listing)
    assert metal.unified
    double, slots = Double(), Slots()
    _loaded(double, slots, [12], measured=False)
    budget = ledger(double, slots, mac(36, 20), (metal,)).budgets(["m0"])[RAM]
    assert budget == 30 * GiB - margin(30 * GiB)
    # Without a list, the share stands in.
    assert ledger(double, slots, mac(36, 20)).budgets(["m0"])[RAM] == 24 * GiB - 2 * GiB


def test_every_budget_goes_through_the_ledger() -> None:
    """One decision, one place: the RAM budget is computed by `Ledger.budgets` alone (the
    loads, the status document and the devices' document all ask it), and what it adds
    back for a model by `memory.returned` alone."""
    root = Path(__file__).resolve().parents[2] / "llamad"
    calls: dict[str, set[str]] = {"auto_budget(": set(), "total_for(": set(), "returned(": set()}
    for path in root.rglob("*.py"):
        text = path.read_text()
        for call in calls:
            if call in text.replace(f"def {call}", ""):
                calls[call].add(str(path.relative_to(root)))
    ledger_file = "gateway/admission/devices/ledger.py"
    memory_file = "gateway/admission/memory.py"
    assert calls == {
        "auto_budget(": {ledger_file},
        "total_for(": {memory_file},
        "returned(": {memory_file},
    }
    budgets = [p for p in root.rglob("*.py") if ".budgets(" in p.read_text()]
    assert {str(p.relative_to(root)) for p in budgets} == {
        "gateway/admission/loads.py",
        "gateway/status_doc.py",
        ledger_file,
    }
