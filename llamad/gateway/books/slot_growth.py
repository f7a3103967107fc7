"""What each request left in its instance's slots, told to whoever saves them
(`supervise/slot_checkpoints.py`), so a crash loses at most the last turn, and what it
took from the cache, which says whether the restore before it paid."""

from __future__ import annotations

from typing import Protocol

from llamad.gateway.books.activity import Record


class Grown(Protocol):
    """Learns that a request ended, leaving its slot holding `held` tokens."""

    def grew(self, instance: str, held: int, cached: int | None, evaluated: int | None) -> None:
        """`held` tokens left in the slot; of the prompt's, `cached` taken from the cache
        and `evaluated` read anew (None: the answer did not say)."""


class SlotGrowth:
    """An activity listener: a request this host's instance answered leaves the slot it
    ran in holding its whole prompt and the tokens it generated."""

    def __init__(self, saves: Grown) -> None:
        self.saves = saves

    def __call__(self, r: Record) -> None:
        if r.host is not None or r.instance is None or r.status != 200:
            return
        held = (r.prompt_tokens or 0) + (r.completion_tokens or 0)
        if held:
            self.saves.grew(r.instance, held, r.prompt_cached, r.prompt_evaluated)
