"""Which loaded models to evict so another fits: a pure decision, table-tested."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Loaded:
    """A model with a process now (starting, running or stopping)."""

    name: str
    size: int  # bytes: measured footprint, else the estimate, else 0
    on_demand: bool
    busy: bool  # requests in flight or waiting, or a load under way
    last_used: float  # monotonic seconds of its last request


def plan(
    need: int, loaded: Sequence[Loaded], max_loaded: int, budget: int | None
) -> list[str] | None:
    """The models to stop, least recently used first, so one needing `need` bytes fits
    under `max_loaded` on-demand models (0: no limit) and `budget` bytes (None: off).

    Always-on and busy models are never chosen. None means it cannot fit now: wait for
    a busy model to become idle. A model bigger than the whole budget may still load
    once it is the only on-demand model left: the budget is an estimate, and refusing
    forever would make that model unusable.
    """
    victims: list[str] = []
    count = sum(1 for m in loaded if m.on_demand)
    used = sum(m.size for m in loaded)
    candidates = sorted((m for m in loaded if m.on_demand and not m.busy), key=_lru)
    pinned_on_demand = count - len(candidates)

    def fits() -> bool:
        if max_loaded and count + 1 > max_loaded:
            return False
        return budget is None or used + need <= budget

    for model in candidates:
        if fits():
            return victims
        victims.append(model.name)
        count -= 1
        used -= model.size
    if fits():
        return victims
    count_ok = not max_loaded or count + 1 <= max_loaded
    if count_ok and pinned_on_demand == 0 and budget is not None and need > budget:
        return victims  # alone over budget: allowed once nothing else on demand is loaded
    return None


def _lru(model: Loaded) -> float:
    return model.last_used
