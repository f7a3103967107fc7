"""What a new set of specs changes in the running set, by instance name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from llamad.config.load import InstanceSpec


@dataclass(frozen=True)
class Changes:
    """What applying new specs did, by instance name."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        """The reload report served by `POST /v1/reload`."""
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
        }


def compare(running: Mapping[str, InstanceSpec], specs: Mapping[str, InstanceSpec]) -> Changes:
    """Sort the names of `running` and `specs`: a changed launch restarts an instance; a
    change to its supervise knobs alone leaves it unchanged (they are read live)."""
    changes = Changes(added=[n for n in specs if n not in running])
    for name, spec in running.items():
        new = specs.get(name)
        if new is None:
            changes.removed.append(name)
        elif new.launch != spec.launch:
            changes.changed.append(name)
        else:
            changes.unchanged.append(name)
    return changes
