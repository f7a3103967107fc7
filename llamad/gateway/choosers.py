"""Names that choose (`[gateway.names.NAME]`): a request by NAME goes to the first of
its models that is loaded, else loads the first (`ModelSets.choice`). The relay answers
with the name asked for, as for an alias; listings show NAME as a model of its own,
in the state of what it means now, and a key may be scoped to it (its `instances` are
the name itself, so a scope that lists its models alone does not reach it).
"""

from __future__ import annotations

from dataclasses import replace

from llamad.gateway.catalog import Views
from llamad.gateway.contract.port import ModelView
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.router import Router


class Choosers:
    """What each name that chooses means now, and how it is listed."""

    def __init__(self, router: Router, views: Views, sets: ModelSets) -> None:
        self.router, self.views, self.sets = router, views, sets

    def resolve(self, name: str) -> str:
        """The instance a request by `name` goes to: the choice of the name that chooses
        called `name`, else `name` itself (so a model's own name always wins)."""
        if self.router.find(name) is not None:
            return name
        chooser = self.sets.chooser(name)
        if chooser is None:
            return name
        return self.sets.choice(chooser) or name

    def named(self, name: str) -> str | None:
        """The name that chooses `name` calls (NAME for `NAME:latest`), unless a model's
        own name or alias is `name`."""
        chooser = self.sets.chooser(name)
        return None if chooser is None or self.router.find(name) is not None else chooser.name

    def view(self, name: str) -> ModelView | None:
        """The name that chooses called `name`, as its choice now, under that name."""
        chooser = self.sets.chooser(name)
        if chooser is None or self.router.find(name) is not None:
            return None
        choice = self.sets.choice(chooser)
        facts = None if choice is None else self.router.find(choice)
        if facts is None:
            return None
        local = self.views.local(facts)
        return replace(local, name=chooser.name, aliases=(), instances=(), replicas=())

    def all(self) -> list[ModelView]:
        """Every name that chooses whose models are still there."""
        found = (self.view(c.name) for c in self.sets.settings().names)
        return [v for v in found if v is not None]
