"""A group (`[gateway.groups.NAME]`) loads and unloads as one: which of a model's
companions to load beside it, and which to stop after it. `Loads` carries both out."""

from __future__ import annotations

import time
from collections.abc import Collection

from llamad.gateway.admission.rules import Slot, StopCause, StopWhy
from llamad.gateway.admission.slots import Slots
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State


class Together:
    """The group rules over the supervisor's states and the gateway's slots."""

    def __init__(
        self,
        supervisor: SupervisorView,
        slots: Slots,
        sets: ModelSets,
        live: Collection[State],  # the states in which a model holds a process (`Loads`)
    ) -> None:
        self.sup, self.slots, self.sets, self.live = supervisor, slots, sets, live

    def to_load(self, name: str) -> list[Slot]:
        """`name`'s companions that are down with no load under way and no failed load's
        backoff running: each gets a load of its own, with nobody waiting for it."""
        out = []
        for other in self.sets.companions(name):
            facts, slot = self.sup.facts(other), self.slots.slot(other)
            if facts is None or facts.state in self.live or slot.load is not None:
                continue
            if not slot.refused(time.monotonic()):
                out.append(slot)
        return out

    def to_stop(self, name: str, why: StopWhy, cause: StopCause | None = None) -> list[Slot]:
        """Once `name` is down, its loaded companions that nothing uses, each claimed
        for a stop for the same reason (a busy one stays until its own idle stop), its
        cause their group, for the model `name` was stopped for."""
        facts = self.sup.facts(name)
        if facts is not None and facts.state in self.live:
            return []  # its stop did not complete: the group stays as it is
        group = getattr(self.sets.group(name), "name", None)
        along = StopCause("group", cause.for_model if cause else None, group)
        out = []
        for other in self.sets.companions(name):
            state, slot = self.sup.facts(other), self.slots.slot(other)
            if state is not None and state.state in self.live and slot.claim_stop(why, along):
                out.append(slot)
        return out
