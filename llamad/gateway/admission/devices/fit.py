"""Which models to evict, device by device, so one more fits; and the line that refuses
a model no device can ever hold. Pure decisions, table-tested."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llamad.gateway.admission.devices.placement import RAM
from llamad.gateway.admission.room import Loaded, plan

GiB = 1024**3


@dataclass(frozen=True)
class Holding:
    """A loaded model and its bytes on each device (`RAM` included)."""

    model: Loaded
    on: Mapping[str, int]


def plan_devices(
    need: Mapping[str, int],
    held: Sequence[Holding],
    max_loaded: int,
    budgets: Mapping[str, int | None],
) -> list[str] | None:
    """The models to stop so a model needing `need` bytes on each device fits: on each
    device it uses, among the models holding memory there (least recently used first),
    then in RAM with `max_loaded` (`room.plan`'s rules). None: wait for a busy model.
    With RAM alone this is exactly `room.plan`."""
    victims: list[str] = []
    for device in sorted(d for d in need if d != RAM and need[d] > 0):
        there = [_on(h, device) for h in held if h.on.get(device, 0) > 0]
        chosen = plan(
            need[device], [m for m in there if m.name not in victims], 0, budgets.get(device)
        )
        if chosen is None:
            return None
        victims += chosen
    rest = [_on(h, RAM) for h in held if h.model.name not in victims]
    chosen = plan(need.get(RAM, 0), rest, max_loaded, budgets.get(RAM))
    return None if chosen is None else victims + chosen


def _on(holding: Holding, device: str) -> Loaded:
    return dataclasses.replace(holding.model, size=holding.on.get(device, 0))


def refusal(
    name: str,
    need: Mapping[str, int],
    held: Sequence[Holding],
    budgets: Mapping[str, int | None],
) -> str | None:
    """Why `name` can never fit, in one line, or None: a device it needs has less room
    than that even with every model that may be evicted gone (always-on models stay).
    RAM is left to `room.plan`, which lets a model over the RAM budget load alone."""
    rooms = _rooms(held, budgets)
    for device in sorted(d for d in need if d != RAM):
        if device in rooms and need[device] > rooms[device]:
            fits = ", ".join(f"{d} {_gib(r)}" for d, r in rooms.items())
            return (
                f"model {name!r} needs {_gib(need[device])} on {device}, which has room for "
                f"{_gib(rooms[device])}; what would fit: {fits} (lower n_gpu_layers, or "
                f'device = "none" for RAM)'
            )
    return None


def _rooms(held: Sequence[Holding], budgets: Mapping[str, int | None]) -> dict[str, int]:
    """Each budgeted device's room with every on-demand model gone, GPUs first."""
    order = [*sorted(d for d in budgets if d != RAM), RAM]
    out = {}
    for device in order:
        budget = budgets.get(device)
        if budget is not None:
            stay = sum(h.on.get(device, 0) for h in held if not h.model.on_demand)
            out[device] = max(0, budget - stay)
    return out


def _gib(size: int) -> str:
    return f"{size / GiB:.1f} GiB"
