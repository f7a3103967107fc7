"""Pins, groups, exclusive sets and names that choose, as the gateway asks about them:
read live from the settings, so a reload takes effect at the next question."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llamad.config.gateway_table import GatewayConfig
from llamad.config.model_sets import ModelSet
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State


class ModelSets:
    """Who is pinned, who loads with whom, who excludes whom, and what a name chooses."""

    def __init__(self, supervisor: SupervisorView, settings: Callable[[], GatewayConfig]) -> None:
        self.sup, self.settings = supervisor, settings

    def pinned(self, name: str) -> bool:
        """`evict = "never"`: never stopped for another model, nor when idle."""
        facts = self.sup.facts(name)
        return facts is not None and facts.spec.pinned

    def group(self, name: str) -> ModelSet | None:
        """The group `name` loads and unloads with."""
        return _holding(self.settings().groups, name)

    def exclusive(self, name: str) -> ModelSet | None:
        """The exclusive set `name` is in."""
        return _holding(self.settings().exclusive, name)

    def companions(self, name: str) -> tuple[str, ...]:
        """The other models of `name`'s group."""
        group = self.group(name)
        return () if group is None else tuple(m for m in group.models if m != name)

    def rivals(self, name: str) -> tuple[str, ...]:
        """The other models of `name`'s exclusive set: loading `name` stops them, and
        their groups with them."""
        found = self.exclusive(name)
        rivals = () if found is None else tuple(m for m in found.models if m != name)
        return tuple(dict.fromkeys(n for r in rivals for n in (r, *self.companions(r))))

    def chooser(self, name: str) -> ModelSet | None:
        """The name that chooses called `name` (also as Ollama spells it, `NAME:latest`)."""
        names = self.settings().names
        found = next((n for n in names if n.name == name), None)
        if found is None and name.endswith(":latest"):
            found = next((n for n in names if n.name == name.removesuffix(":latest")), None)
        return found

    def choice(self, chooser: ModelSet) -> str | None:
        """What `chooser` means now: the first of its models that serves, else the first
        that is loading (its load is joined), else the first (loaded by the request);
        None when none of them is in the config any more."""
        present = [m for m in chooser.models if self.sup.facts(m) is not None]
        for state in (State.RUNNING, State.STARTING):
            for name in present:
                facts = self.sup.facts(name)
                if facts is not None and facts.state is state and not facts.closing:
                    return name
        return present[0] if present else None

    def status_of(self, name: str) -> dict[str, Any]:
        """An instance's pin, group and exclusive set, for the status document."""
        group, exclusive = self.group(name), self.exclusive(name)
        return {
            "pinned": self.pinned(name),
            "group": None if group is None else group.name,
            "exclusive": None if exclusive is None else exclusive.name,
        }

    def status(self) -> dict[str, Any]:
        """The sets daemon-wide, and what each name that chooses means now."""
        cfg = self.settings()
        return {
            "groups": {g.name: list(g.models) for g in cfg.groups},
            "exclusive": {x.name: list(x.models) for x in cfg.exclusive},
            "names": {n.name: {"models": list(n.models), "now": self.choice(n)} for n in cfg.names},
        }


def _holding(sets: tuple[ModelSet, ...], name: str) -> ModelSet | None:
    return next((s for s in sets if name in s.models), None)
