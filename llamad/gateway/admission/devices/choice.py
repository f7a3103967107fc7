"""Which GPU a model goes on when its config does not say: a pure decision, table-tested.

A model that fits one GPU runs faster there than split over several, and leaves the
others whole; so one GPU with room now comes first (the one with most room left after
it, as Ollama picks), then the spread over all of them if that fits now, then the one
GPU that could hold it once models that may go are evicted (the one with most room now,
so the least goes). Otherwise the spread: what fits nowhere is refused by `fit.refusal`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from llamad.gateway.admission.devices.fit import Holding
from llamad.gateway.admission.devices.placement import RAM


def choose(
    needs: Mapping[str | None, Mapping[str, int]],
    held: Sequence[Holding],
    budgets: Mapping[str, int | None],
    stay: Collection[str] = (),
) -> str | None:
    """The place in `needs` (a GPU's name, or None for the spread) to start a model that
    needs `needs[place]` bytes on each device there. `held` is what the loaded models
    hold; `stay` names the on-demand ones that may not be evicted (pinned)."""
    gpus = {d: b for d, b in budgets.items() if d != RAM and b is not None}
    singles = [p for p in needs if p is not None]
    if not singles or not gpus:
        return None
    now = {d: b - sum(h.on.get(d, 0) for h in held) for d, b in gpus.items()}
    fixed = [h for h in held if not h.model.on_demand or h.model.name in stay]
    ever = {d: b - sum(h.on.get(d, 0) for h in fixed) for d, b in gpus.items()}

    def left(place: str | None, room: Mapping[str, int]) -> int | None:
        """The least room left on a GPU it uses, None when one cannot hold it."""
        spare = [room[d] - n for d, n in needs[place].items() if d in room and n > 0]
        return None if any(s < 0 for s in spare) else min(spare, default=0)

    if fitting := [(s, left(s, now)) for s in singles if left(s, now) is not None]:
        return max(fitting, key=lambda pair: pair[1] or 0)[0]
    if None in needs and left(None, now) is not None:
        return None
    if could := [s for s in singles if left(s, ever) is not None]:
        return max(could, key=lambda s: now.get(s, 0))
    return None
