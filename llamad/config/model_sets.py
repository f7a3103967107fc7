"""`[gateway.groups.NAME]`, `[gateway.exclusive.NAME]` and `[gateway.names.NAME]`: models
loaded and unloaded together, models that exclude each other, and names that mean
"whichever of these is loaded, else the first".

Each table lists its models by instance name or alias; resolved, a set holds instance
names. Groups and exclusive sets hold on-demand instances only (an always-on instance is
never loaded nor stopped by the gateway).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from llamad.backends.spec import InstanceSpec

Problem = Callable[[tuple[str, ...], str], None]


class MembersSettings(BaseModel):
    """One set as written: the models it holds."""

    model_config = ConfigDict(extra="forbid")

    models: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class ModelSet:
    """A group, an exclusive set or a name that chooses, resolved: instance names."""

    name: str
    models: tuple[str, ...]


def resolve_sets(
    section: str,
    tables: Mapping[str, MembersSettings],
    specs: Mapping[str, InstanceSpec],
    owner: Mapping[str, frozenset[str]],
    problem: Problem,
) -> tuple[ModelSet, ...]:
    """`[gateway.SECTION.NAME]` tables (`groups`, `exclusive` or `names`) as sets; a name
    that chooses may hold always-on instances, the others on-demand ones alone, each in
    one set of its section."""
    out: list[ModelSet] = []
    taken: dict[str, str] = {}  # instance -> the set of this section that holds it
    for name, table in tables.items():
        where = ("gateway", section, name, "models")
        members: list[str] = []
        for model in table.models:
            found = owner.get(model, frozenset())
            if len(found) != 1:
                known = ", ".join(sorted(specs)) or "none"
                why = "names replicas" if found else "is no instance nor alias"
                problem(where, f"{model!r} {why}: list instances, one each (instances: {known})")
                continue
            (instance,) = found
            if instance in members:
                problem(where, f"{model!r} is listed twice (as instances.{instance})")
                continue
            if section != "names" and not specs[instance].on_demand:
                problem(
                    where,
                    f"{model!r} is not on_demand: the gateway never loads nor stops "
                    "an always-on instance",
                )
                continue
            if section != "names" and (other := taken.setdefault(instance, name)) != name:
                problem(where, f"{model!r} is already in gateway.{section}.{other}")
                continue
            members.append(instance)
        if section != "names" and len(table.models) < 2:
            problem(where, f"{table.models!r} holds one model: a set needs two or more")
        out.append(ModelSet(name, tuple(members)))
    return tuple(out)


def check_pins(
    groups: tuple[ModelSet, ...], specs: Mapping[str, InstanceSpec], problem: Problem
) -> None:
    """A group stops as one, so its models are pinned together or not at all."""
    for group in groups:
        pinned = [m for m in group.models if specs[m].pinned]
        if pinned and len(pinned) != len(group.models):
            loose = next(m for m in group.models if not specs[m].pinned)
            problem(
                ("gateway", "groups", group.name, "models"),
                f'instances.{pinned[0]} has evict = "never" and instances.{loose} does not: '
                "a group's models are pinned together or not at all",
            )


def check_overlap(
    groups: tuple[ModelSet, ...], exclusive: tuple[ModelSet, ...], problem: Problem
) -> None:
    """Two models of one group load together, so they cannot exclude each other."""
    for group in groups:
        for rivals in exclusive:
            both = [m for m in group.models if m in rivals.models]
            if len(both) > 1:
                problem(
                    ("gateway", "exclusive", rivals.name, "models"),
                    f"instances.{both[0]} and instances.{both[1]} are both in "
                    f"gateway.groups.{group.name}, which loads them together",
                )


def check_choosers(
    names: tuple[ModelSet, ...], owner: Mapping[str, frozenset[str]], problem: Problem
) -> None:
    """A name that chooses is a name of its own: no instance's name nor alias."""
    for chooser in names:
        bare = chooser.name.removesuffix(":latest")
        for taken in (chooser.name, bare):
            if taken in owner:
                holder = ", ".join(f"instances.{i}" for i in sorted(owner[taken]))
                problem(
                    ("gateway", "names", chooser.name),
                    f"{chooser.name!r} is already a model name ({holder}): choose another",
                )
                break
