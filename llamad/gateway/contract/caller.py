"""Who a request comes from, as every room sees it: a key's name and the models it may use.

The door (`access/door.py`) makes one per request and passes it on explicitly."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from: a key's name and the instances it may use."""

    name: str | None = None  # the key's name; None on a gateway without keys
    models: frozenset[str] | None = None  # instance names; None: every model

    @property
    def scoped(self) -> bool:
        """Limited to some models (`models = [...]` in its `[gateway.keys.NAME]`)."""
        return self.models is not None

    def may_use(self, instance: str) -> bool:
        """This caller may use instance (or fleet model) `instance`."""
        return self.models is None or instance in self.models

    def may_use_all(self, instances: Iterable[str]) -> bool:
        """This caller may use every one of `instances` (an alias's replicas)."""
        return self.models is None or all(n in self.models for n in instances)


# A gateway without keys, and the daemon's own requests: every model.
ANYONE = Caller()
