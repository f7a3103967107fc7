"""The model names the gateway routes: instance names, aliases, and replicas.

An instance's name reaches that instance alone, so no alias may be an instance's name
(also as Ollama reads it: `beta:latest` is `beta`). An alias several instances declare
makes them replicas of one model: they must be of one kind and spell it the same way,
and a warning says when their model files differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from llamad.backends.spec import InstanceSpec

Problem = Callable[[tuple[str, ...], str], None]
Note = tuple[tuple[str, ...], str]  # (keys from the top of the file, message)

OLLAMA = " (Ollama reads NAME:latest as NAME)"


def check_names(specs: Mapping[str, InstanceSpec], problem: Problem) -> None:
    """Each instance name routes to its instance alone; an alias shared by instances
    routes to all of them, which must be of one kind."""
    first: dict[str, InstanceSpec] = {}  # each bare alias: the first instance declaring it
    for spec in specs.values():
        where = ("instances", spec.name, "aliases")
        for alias in spec.aliases:
            bare = alias.removesuffix(":latest")
            if bare in specs:
                ollama = OLLAMA if bare != alias else ""
                problem(
                    where,
                    f"model name {alias!r} is instances.{bare}{ollama}; an instance's name "
                    "reaches that instance alone, so no alias may take it",
                )
                continue
            other = first.setdefault(bare, spec)
            if other is spec:
                continue
            spelt = next(a for a in other.aliases if a.removesuffix(":latest") == bare)
            if spelt != alias:
                problem(
                    where,
                    f"alias {alias!r} is spelt {spelt!r} by instances.{other.name}: replicas "
                    "of one model share one spelling",
                )
            elif other.kind != spec.kind:
                problem(
                    where,
                    f"alias {alias!r} is shared with instances.{other.name}, of kind "
                    f"{other.kind!r}, not {spec.kind!r}: replicas of one model are of one kind",
                )


def replica_warnings(specs: Mapping[str, InstanceSpec]) -> Iterator[Note]:
    """Replicas of one alias that serve different model files: valid, but a request
    could get either model's answer."""
    first: dict[str, InstanceSpec] = {}
    for spec in specs.values():
        for alias in spec.aliases:
            other = first.setdefault(alias, spec)
            if other is not spec and other.model != spec.model:
                yield (
                    ("instances", spec.name, "aliases"),
                    f"alias {alias!r} is shared with instances.{other.name}, which serves "
                    f"{other.model or 'another model'}, not {spec.model or 'the same file'}: "
                    "its replicas should serve one model",
                )


def owners(specs: Mapping[str, InstanceSpec]) -> dict[str, frozenset[str]]:
    """Each model name and alias -> the instances it routes to."""
    out: dict[str, set[str]] = {}
    for spec in specs.values():
        for name in (spec.name, *spec.aliases):
            out.setdefault(name, set()).add(spec.name)
    return {name: frozenset(found) for name, found in out.items()}
