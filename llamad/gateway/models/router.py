"""Model names to instances: every instance name and alias, read live from the supervisor."""

from __future__ import annotations

from llamad.backends.registry import backend_for
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.supervise.facts import Facts


class Router:
    """Finds the instance a model name means; names removed by a reload vanish at once."""

    def __init__(self, supervisor: SupervisorView) -> None:
        self.sup = supervisor

    def routable(self) -> list[Facts]:
        """Every instance the gateway can send requests to, in config order."""
        out = []
        for name in self.sup.names():
            facts = self.sup.facts(name)
            if facts is None or facts.closing or facts.retiring:
                continue
            if backend_for(facts.spec.kind).serves_http:
                out.append(facts)
        return out

    def find(self, model: str) -> Facts | None:
        """The instance named `model` or having it as an alias; failing that, the one
        instance whose name or alias is `model` in another case (`user/repo:Q4_k_m`)."""
        facts = self.sup.facts(model)
        if facts is not None and not facts.closing and not facts.retiring:
            return facts if backend_for(facts.spec.kind).serves_http else None
        routable = self.routable()
        for facts in routable:
            if model in facts.spec.aliases:
                return facts
        # Ollama and Hugging Face users type quants in any case; two names that differ
        # only in case stay apart (neither is picked for a third spelling).
        folded = model.casefold()
        hits = [f for f in routable if folded in {n.casefold() for n in (f.name, *f.spec.aliases)}]
        return hits[0] if len(hits) == 1 else None

    def owns(self, model: str) -> bool:
        """Whether `model` is an instance's own name (in any letter case): a request by
        it reaches that instance alone, never a replica elsewhere."""
        facts = self.find(model)
        return facts is not None and facts.name.casefold() == model.casefold()

    def find_all(self, model: str) -> list[Facts]:
        """Every instance named `model` or having it as an alias: its local replicas."""
        return [f for f in self.routable() if model == f.name or model in f.spec.aliases]

    def sharing(self, model: str) -> list[Facts]:
        """The instances sharing alias `model`, also in another case (its local
        replicas), or none when fewer than two answer to it. An instance's name is never
        an alias: asked first."""
        if self.sup.facts(model) is not None:
            return []
        routable = self.routable()
        alias = _spelt(model, routable)
        found = [f for f in routable if alias in f.spec.aliases]
        return found if len(found) > 1 else []

    def spelling(self, model: str) -> str:
        """`model` as the config spells it: itself when an instance answers to it, else
        the one name or alias it matches in another case (`q` for `Q`), else itself."""
        return model if self.sup.facts(model) is not None else _spelt(model, self.routable())

    def names(self) -> list[str]:
        """Every model name a request may use, for a 404's list."""
        return [n for f in self.routable() for n in (f.name, *f.spec.aliases)]


def _spelt(model: str, routable: list[Facts]) -> str:
    """The name or alias of `routable` that `model` is, exactly or else in another case
    when only one spelling matches (replicas share theirs: one model, one spelling)."""
    names = {n for f in routable for n in (f.name, *f.spec.aliases)}
    if model in names:
        return model
    folded = model.casefold()
    hits = {n for n in names if n.casefold() == folded}
    return hits.pop() if len(hits) == 1 else model
