"""Room for a load under pins, groups and exclusive sets, around `room.plan`.

A pinned model is never a victim; when only stopping one would make room, the load is
refused with a line naming it rather than waiting for ever. Loading a model stops the
rest of its exclusive set first (a busy one finishes its requests), never its own group,
and a victim takes its idle group along.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import structlog

from llamad.gateway.admission.room import Loaded
from llamad.gateway.admission.rules import StopCause
from llamad.gateway.contract.port import GatewayError
from llamad.gateway.models.model_sets import ModelSets

log = structlog.get_logger("llamad.gateway")


class Pinned(GatewayError):
    """Loading the model would need a pinned model stopped."""

    status = 503
    code = "model_pinned"
    retry_after = 30.0


class NoRoomAlong(GatewayError):
    """A model loading along with its group found no room now: nobody waits for it, so
    it does not hold up other loads waiting for room; its next request loads it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"model {name!r} was not loaded along with its group: no room now")


def arrange(
    name: str,
    loaded: Sequence[Loaded],
    sets: ModelSets,
    planner: Callable[[Sequence[Loaded]], list[str] | None],
    waiting: int = 1,
) -> list[str] | None:
    """The models to stop so `name` fits, as `planner` (`room.plan`'s rules, per device)
    decides among the models it may stop: None means wait for a busy one.
    Raises Pinned when a pinned model is in the way, and NoRoomAlong rather than wait
    when no request `waiting` for it (a group's model loading along)."""
    rivals = set(sets.rivals(name))
    for model in loaded:
        if model.name in rivals and sets.pinned(model.name):
            set_name = getattr(sets.exclusive(name), "name", "?")
            raise Pinned(
                f'model {name!r} cannot load: pinned model {model.name!r} (evict = "never") '
                f"is loaded and in exclusive set {set_name!r} with it"
            )
    keep = {*sets.companions(name)}
    pinned = {m.name for m in loaded if sets.pinned(m.name)}
    going = [m for m in loaded if m.name in rivals]
    held = keep | pinned
    rest = [replace(m, busy=m.busy or m.name in held) for m in loaded if m.name not in rivals]
    victims = planner(rest)
    if victims is None:
        freed = [replace(m, busy=False) if m.name in pinned else m for m in rest]
        would = planner(freed) or []
        if in_way := [v for v in would if v in pinned]:
            raise Pinned(
                f'model {name!r} cannot load: pinned model {in_way[0]!r} (evict = "never") '
                "holds the room it needs"
            )
        _unless_alone(name, waiting)
        return None
    if any(m.busy for m in going):
        _unless_alone(name, waiting)
        return None  # a rival finishes its requests first
    idle = {m.name for m in rest if not m.busy}
    along = [c for v in victims for c in sets.companions(v) if c in idle and c not in keep]
    return list(dict.fromkeys([*(m.name for m in going), *victims, *along]))


def causes(
    name: str, victims: Sequence[str], loaded: Sequence[Loaded], sets: ModelSets, max_loaded: int
) -> dict[str, StopCause]:
    """Why `arrange` chose each of `victims` so that `name` loads: its exclusive set, the
    group of another victim, else the count (`max_loaded`) or memory."""
    rivals = set(sets.rivals(name))
    exclusive = getattr(sets.exclusive(name), "name", None)
    counted = sum(1 for m in loaded if m.on_demand and m.name not in rivals)
    room = "max_loaded" if max_loaded and counted >= max_loaded else "memory"
    out: dict[str, StopCause] = {}
    for victim in victims:
        if victim in rivals:
            out[victim] = StopCause("exclusive", name, exclusive)
    for victim in victims:
        if victim not in out:
            out[victim] = StopCause(room, name)
            group = sets.group(victim)
            for along in sets.companions(victim):
                if along in victims and along not in out:
                    out[along] = StopCause("group", name, getattr(group, "name", None))
    return out


def _unless_alone(name: str, waiting: int) -> None:
    """Waiting for room is for a load requests wait for; one nobody waits for ends."""
    if not waiting:
        log.info("gateway.load_skipped", model=name, reason="no room now")
        raise NoRoomAlong(name)
