"""What a requested name means: the one place a name becomes a model, for every route.

A name is an instance's, an alias (one several instances may share), a name that
chooses (`choosers.py`) or a fleet peer's model, with or without Ollama's `:latest`
(`tags.meant`). Routes, the door's key scope and the lease all ask here, so they
cannot disagree on what a name reaches.
"""

from __future__ import annotations

from llamad.gateway.catalog import Views
from llamad.gateway.choosers import Choosers
from llamad.gateway.contract.port import ModelView
from llamad.gateway.models.router import Router
from llamad.gateway.models.tags import meant


class Lookup:
    """Names to models, over the router, the views and the names that choose."""

    def __init__(self, router: Router, views: Views, choosers: Choosers) -> None:
        self.router, self.views, self.choosers = router, views, choosers

    def meant(self, name: str) -> str:
        """The name a request for `name` resolves by (`tags.meant`: `m:latest` is `m`)."""
        return meant(name, lambda n: self._find(n) is not None)

    def resolve(self, name: str) -> str:
        """The instance (or alias) a request by `name` goes to now: a name that chooses
        is its choice at this moment."""
        return self.choosers.resolve(self.meant(name))

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (instance name, alias or a name that chooses; `:latest`
        or not), or None; an alias several instances share is one model (`Views.shared`)."""
        return self._find(self.meant(name))

    def _find(self, name: str) -> ModelView | None:
        if chosen := self.choosers.view(name):
            return chosen
        if found := self.router.sharing(name):
            return self.views.shared(self.router.spelling(name), found)
        facts = self.router.find(name)
        if facts is not None:
            return self.views.local(facts)
        return next((v for v in self.views.all() if name in (v.name, *v.aliases)), None)

    def instances(self, name: str) -> tuple[str, ...] | None:
        """The instances (or the fleet peer's model) `name` means, as `find` resolves it,
        without making its view: what a key's list is checked against (a name that
        chooses is itself)."""
        name = self.meant(name)
        if (chooser := self.choosers.named(name)) is not None:
            return (chooser,)
        if found := self.router.sharing(name):
            return tuple(f.name for f in found)
        if (facts := self.router.find(name)) is not None:
            return (facts.name,)
        view = self.find(name)
        return None if view is None else view.instances or (view.name,)
