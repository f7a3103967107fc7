"""The one place that says how much of each device a model holds and what each device's
budget is, for the loads that evict and for the status that shows it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llamad.backends.devices.placed import placed, says_where
from llamad.backends.devices.probe import Machine
from llamad.backends.gguf_meta import read_gguf_meta
from llamad.backends.spec import InstanceSpec
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission import memory
from llamad.gateway.admission.devices.book import DeviceBook
from llamad.gateway.admission.devices.placement import RAM, offload_shares, split
from llamad.gateway.admission.slots import Slots
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State

HOLDING = (State.RUNNING, State.STOPPING)  # a process with its model's memory in place


class Ledger:
    """Bytes per device for each model, and the budget of each device."""

    def __init__(
        self,
        supervisor: SupervisorView,
        slots: Slots,
        settings: Callable[[], GatewayConfig],
        book: DeviceBook,
        ram: Callable[[], memory.RamReading] = memory.read_ram,
    ) -> None:
        self.sup, self.slots, self.settings, self.book = supervisor, slots, settings, book
        self.ram = ram

    def size(self, name: str) -> int | None:
        """The measured footprint (RAM) of `name` once it has run, else its estimate."""
        facts = self.sup.facts(name)
        measured = self.slots.slot(name).measured
        if measured is not None or facts is None:
            return measured
        return memory.estimate(facts.spec)

    def held(self, name: str) -> memory.Held:
        """What the RAM budget adds back for `name` is decided from this: the bytes its
        RAM count holds (the measurement itself, which knows its anonymous part, else
        the estimate's RAM share) and whether its process holds them now."""
        facts = self.sup.facts(name)
        measured = self.slots.slot(name).measured
        count = measured if measured is not None else self.on(name).get(RAM, 0)
        holding = facts is not None and facts.state in HOLDING
        return memory.Held(count, measured is not None, holding)

    def on(self, name: str, machine: Machine | None = None) -> dict[str, int]:
        """What `name` holds (or would hold) on each device, `RAM` included, where its
        latest start placed it. With no devices, its size in RAM, as the RAM-only budget
        has always counted it."""
        facts = self.sup.facts(name)
        return self.need(name, facts.device if facts else None, machine)

    def need(self, name: str, device: str | None, machine: Machine | None = None) -> dict[str, int]:
        """What `name` holds (or would hold) on each device when started on `device`
        (None: where its settings send it)."""
        machine = machine or self.book.machine
        facts = self.sup.facts(name)
        if facts is None or not machine.devices:
            return {RAM: self.size(name) or 0}
        spec = placed(facts.spec, device)
        shares = offload_shares(dict(spec.settings), _layers(spec), machine.devices)
        if not shares:
            return {RAM: self.size(name) or 0}
        unified = [d.name for d in machine.devices if d.unified]
        gpu = machine.held.get(facts.pid) if facts.pid is not None else None
        estimate = memory.estimate(facts.spec)
        return split(estimate, shares, unified, self.slots.slot(name).measured, gpu)

    def places(self, name: str) -> list[str | None]:
        """Where the gateway may start `name`: on each GPU alone, or over all of them as
        llama-server spreads it (None). Only None when its config says where, or there
        is no GPU to choose between."""
        facts = self.sup.facts(name)
        devices = [d.name for d in self.book.devices]
        if facts is None or len(devices) < 2 or says_where(facts.spec):
            return [None]
        return [*devices, None]

    async def discover(self, live: Callable[[], Iterable[str]]) -> None:
        """List the devices (once); `live()` names the models holding memory now."""
        await self.book.discover(self._ours(live))

    async def refresh(self, live: Callable[[], Iterable[str]]) -> None:
        """Read the devices' free memory again where a vendor tool can."""
        await self.book.refresh(self._ours(live))

    def _ours(self, live: Callable[[], Iterable[str]]) -> Callable[[Machine], dict[str, int]]:
        def ours(machine: Machine) -> dict[str, int]:
            total: dict[str, int] = {}
            for name in live():
                for device, size in self.on(name, machine).items():
                    total[device] = total.get(device, 0) + size
            return total

        return ours

    def budgets(self, live: Iterable[str]) -> dict[str, int | None]:
        """Each device's budget (None: no budget), `RAM`'s from `memory_budget` given the
        models in `live`; the GPUs' follow `auto` unless the budget is off."""
        setting = self.settings().memory_budget
        if setting != "auto":
            ram = setting
        else:
            metal = next((d.total for d in self.book.devices if d.unified), None)
            ram = memory.auto_budget(map(self.held, live), metal, self.ram())
        out: dict[str, int | None] = {RAM: ram}
        if setting is not None:
            out.update((d.name, self.book.budget(d)) for d in self.book.devices)
        return out

    def devices_doc(self, live: Iterable[str]) -> list[dict[str, Any]]:
        """The status document's `devices`: each GPU's size, budget, use and models."""
        names = list(live)
        budgets = self.budgets(names)
        held = {n: self.on(n) for n in names}
        out = []
        for d in self.book.devices:
            models = {n: on[d.name] for n, on in held.items() if on.get(d.name)}
            used, budget = sum(models.values()), budgets.get(d.name)
            out.append({
                "name": d.name,
                "description": d.description,
                "unified": d.unified,
                "total_bytes": d.total,
                "free_bytes": d.free,
                "budget_bytes": budget,
                "used_bytes": used,
                "left_bytes": None if budget is None else budget - used,
                "models": models,
            })  # fmt: skip
        return out


def _layers(spec: InstanceSpec) -> int | None:
    if spec.model is None:
        return None
    try:
        return read_gguf_meta(spec.model).block_count or None
    except (OSError, ValueError):
        return None
