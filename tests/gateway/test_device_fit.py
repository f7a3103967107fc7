"""Memory per device as tables: where a model's bytes go, and what to evict where."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from llamad.backends.devices.probe import Machine
from llamad.backends.devices.readings import Device
from llamad.backends.tool import ServerCommand
from llamad.gateway.admission.devices.book import DeviceBook
from llamad.gateway.admission.devices.fit import Holding, plan_devices, refusal
from llamad.gateway.admission.devices.placement import RAM, offload_shares, split
from llamad.gateway.admission.room import Loaded, plan

G = 1024**3
CUDA0 = Device("CUDA0", "RTX 4090", 24 * G, 23 * G)
CUDA1 = Device("CUDA1", "RTX 3060", 12 * G, 11 * G)
METAL = Device("Metal", "Apple M2", 10 * G, 10 * G)


@pytest.mark.parametrize(
    ("settings", "layers", "devices", "shares"),
    [
        pytest.param({}, 32, [], {}, id="no devices"),
        pytest.param({}, 32, [CUDA0], {"CUDA0": 1.0}, id="all layers by default"),
        pytest.param({"LLAMA_ARG_N_GPU_LAYERS": "0"}, 32, [CUDA0], {}, id="ngl 0"),
        pytest.param({"LLAMA_ARG_N_GPU_LAYERS": "all"}, 32, [CUDA0], {"CUDA0": 1.0}, id="all"),
        pytest.param({"LLAMA_ARG_N_GPU_LAYERS": "11"}, 32, [CUDA0], {"CUDA0": 1 / 3}, id="part"),
        pytest.param({"LLAMA_ARG_N_GPU_LAYERS": "99"}, 32, [CUDA0], {"CUDA0": 1.0}, id="more"),
        pytest.param({"LLAMA_ARG_N_GPU_LAYERS": "8"}, None, [CUDA0], {"CUDA0": 1.0},
                     id="layers unknown"),
        pytest.param({}, 32, [CUDA0, CUDA1], {"CUDA0": 2 / 3, "CUDA1": 1 / 3},
                     id="split by size"),
        pytest.param({"LLAMA_ARG_TENSOR_SPLIT": "1,1"}, 32, [CUDA0, CUDA1],
                     {"CUDA0": 0.5, "CUDA1": 0.5}, id="tensor split"),
        pytest.param({"LLAMA_ARG_DEVICE": "CUDA1"}, 32, [CUDA0, CUDA1], {"CUDA1": 1.0},
                     id="device named"),
        pytest.param({"LLAMA_ARG_DEVICE": "none"}, 32, [CUDA0], {}, id="device none"),
        pytest.param({"LLAMA_ARG_SPLIT_MODE": "none"}, 32, [CUDA0, CUDA1], {"CUDA0": 1.0},
                     id="split none: main gpu"),
        pytest.param({"LLAMA_ARG_SPLIT_MODE": "none", "LLAMA_ARG_MAIN_GPU": "1"}, 32,
                     [CUDA0, CUDA1], {"CUDA1": 1.0}, id="split none, main gpu 1"),
        pytest.param({}, 32, [METAL], {"Metal": 1.0}, id="metal"),
    ],
)  # fmt: skip
def test_offload_shares(
    settings: dict[str, str], layers: int | None, devices: list[Device], shares: dict[str, float]
) -> None:
    assert offload_shares(settings, layers, devices) == pytest.approx(shares)


def test_split_estimates_then_measures() -> None:
    assert split(9 * G, {"CUDA0": 1.0}) == {"CUDA0": 9 * G, RAM: 0}
    assert split(9 * G, {"CUDA0": 1 / 3}) == {"CUDA0": 3 * G, RAM: 6 * G}
    # Metal is the RAM too.
    assert split(9 * G, {"Metal": 1.0}, ["Metal"]) == {"Metal": 9 * G, RAM: 9 * G}
    # Measurements replace the estimate where they reach: RAM's USS, the vendor's count.
    assert split(9 * G, {"CUDA0": 1.0}, ram_measured=G) == {"CUDA0": 9 * G, RAM: G}
    both = split(9 * G, {"CUDA0": 0.5, "CUDA1": 0.25}, gpu_measured=6 * G)
    assert both == {"CUDA0": 4 * G, "CUDA1": 2 * G, RAM: int(9 * G - 4.5 * G - 2.25 * G)}


def held(name: str, used: float, on_demand: bool = True, busy: bool = False, **on: float):
    size = {d: int(v * G) for d, v in on.items()}
    return Holding(Loaded(name, size.get(RAM, 0), on_demand, busy, used), size)


BUDGETS = {RAM: 64 * G, "CUDA0": 20 * G, "CUDA1": 10 * G}


@pytest.mark.parametrize(
    ("need", "loaded", "victims"),
    [
        pytest.param({"CUDA0": 8 * G, RAM: 0}, [held("a", 1, CUDA0=12, RAM=1),
                      held("b", 0, CUDA1=8, RAM=1)], [], id="fits"),
        pytest.param({"CUDA0": 12 * G, RAM: 0}, [held("a", 1, CUDA0=12, RAM=1),
                      held("b", 0, CUDA1=8, RAM=1)], ["a"], id="evicts from that GPU only"),
        pytest.param({"CUDA0": 12 * G, RAM: 0}, [held("a", 1, CUDA0=6, RAM=1),
                      held("c", 2, CUDA0=6, RAM=1), held("b", 0, CUDA1=8, RAM=1)], ["a"],
                     id="least recently used there"),
        pytest.param({"CUDA0": 12 * G, RAM: 0}, [held("a", 1, busy=True, CUDA0=12)], None,
                     id="busy there: wait"),
        pytest.param({"CUDA1": 4 * G, RAM: 60 * G}, [held("a", 2, CUDA0=12, RAM=8),
                      held("b", 1, CUDA1=8, RAM=1)], ["b", "a"], id="GPU then RAM"),
    ],
)  # fmt: skip
def test_plan_devices(
    need: dict[str, int], loaded: list[Holding], victims: list[str] | None
) -> None:
    assert plan_devices(need, loaded, 0, BUDGETS) == victims


def test_with_ram_alone_it_is_room_plan() -> None:
    loaded = [held("a", 1, RAM=3), held("b", 2, RAM=3), held("c", 0, busy=True, RAM=1)]
    for need in (1, 3, 5, 9, 20):
        for max_loaded in (0, 2, 3):
            for budget in (None, 8 * G):
                want = plan(need * G, [h.model for h in loaded], max_loaded, budget)
                got = plan_devices({RAM: need * G}, loaded, max_loaded, {RAM: budget})
                assert got == want


def test_refusal_says_what_would_fit() -> None:
    assert refusal("m", {"CUDA0": 20 * G, RAM: 0}, [held("a", 1, CUDA0=12)], BUDGETS) is None
    always = [held("a", 1, on_demand=False, CUDA0=12)]
    line = refusal("m", {"CUDA0": 10 * G, RAM: 0}, always, BUDGETS)
    assert line == (
        "model 'm' needs 10.0 GiB on CUDA0, which has room for 8.0 GiB; what would fit: "
        'CUDA0 8.0 GiB, CUDA1 10.0 GiB, RAM 64.0 GiB (lower n_gpu_layers, or device = "none" '
        "for RAM)"
    )
    assert refusal("m", {"CUDA0": 30 * G, RAM: 0}, [], BUDGETS) is not None
    assert refusal("m", {"CUDA0": 30 * G, RAM: 0}, [], {RAM: None}) is None  # budget off
    assert refusal("m", {RAM: 90 * G}, [], BUDGETS) is None  # RAM: room.plan's rule


def test_a_budget_is_free_memory_plus_ours_at_the_reading() -> None:

    readings = iter([Device("CUDA0", "RTX 4090", 24 * G, free * G) for free in (8, 4)])
    listed = Machine((Device("CUDA0", "RTX 4090", 24 * G, 20 * G),))
    lists: list[ServerCommand] = []

    async def discover(server: ServerCommand) -> Machine:
        lists.append(server)
        return listed

    async def refresh(machine: Machine) -> Machine:
        return Machine((next(readings),))

    async def run() -> list[int]:
        book = DeviceBook(lambda: ServerCommand(Path("llama-server")), discover, refresh)
        budgets = []
        await book.refresh(lambda m: {"CUDA0": 0})  # not listed yet: a load waits for it
        budgets.append(book.budget(book.devices[0]))  # 20 free, none ours
        await book.discover(lambda m: {"CUDA0": 0})  # once only
        await book.refresh(lambda m: {"CUDA0": 12 * G})  # ours took 12 of it
        budgets.append(book.budget(book.devices[0]))
        await book.refresh(lambda m: {"CUDA0": 12 * G})  # something else took 4 more
        budgets.append(book.budget(book.devices[0]))
        return budgets

    budgets = asyncio.run(run())
    assert len(lists) == 1
    assert budgets == [18 * G, 18 * G, 16 * G - int(16 * G * 0.1)]


def test_a_load_waits_for_the_listing_under_way() -> None:
    """A decision before the devices are listed waits for the one listing, never RAM alone."""
    started, gate = asyncio.Event(), asyncio.Event()
    lists: list[ServerCommand] = []

    async def discover(server: ServerCommand) -> Machine:
        lists.append(server)
        started.set()
        await gate.wait()
        return Machine((CUDA0,))

    async def refresh(machine: Machine) -> Machine:
        return machine

    async def run() -> tuple[str, ...]:
        book = DeviceBook(lambda: ServerCommand(Path("llama-server")), discover, refresh)

        async def decide() -> tuple[str, ...]:
            await book.refresh(lambda m: {})  # a load, while the listing runs
            return tuple(d.name for d in book.devices)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(book.discover(lambda m: {}))  # the gateway's start
            deciding = tg.create_task(decide())
            await started.wait()
            gate.set()
        return deciding.result()

    assert asyncio.run(run()) == ("CUDA0",)
    assert len(lists) == 1


def test_no_llama_server_means_ram_alone() -> None:

    book = DeviceBook(lambda: None)
    asyncio.run(book.discover(lambda m: {}))
    assert book.devices == ()


def test_another_llama_server_lists_the_devices_again() -> None:
    cuda = Machine((CUDA0,))
    metal = Machine((METAL,))
    listings = {Path("llama-server"): cuda, Path("/opt/llama"): metal}
    server = [ServerCommand(Path("llama-server"))]

    async def discover(command: ServerCommand) -> Machine:
        return listings[command.path]

    async def refresh(machine: Machine) -> Machine:
        return machine

    async def run() -> list[tuple[str, ...]]:
        book = DeviceBook(lambda: server[0], discover, refresh)
        seen = []
        await book.discover(lambda m: {})
        seen.append(tuple(d.name for d in book.devices))
        await book.refresh(lambda m: {})  # the same server: not listed again
        seen.append(tuple(d.name for d in book.devices))
        server[0] = ServerCommand(Path("/opt/llama"), ("serve",))  # a reload named it
        await book.refresh(lambda m: {})
        seen.append(tuple(d.name for d in book.devices))
        return seen

    assert asyncio.run(run()) == [("CUDA0",), ("CUDA0",), ("Metal",)]
