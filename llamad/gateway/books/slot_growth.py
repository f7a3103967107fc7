"""What each request added to its instance's slots, told to whoever saves them
(`supervise/slot_checkpoints.py`), so a crash loses at most the last turn."""

from __future__ import annotations

from typing import Protocol

from llamad.gateway.books.activity import Record


class Grown(Protocol):
    """Learns how many tokens requests added to an instance's slots."""

    def grew(self, instance: str, tokens: int) -> None: ...


class SlotGrowth:
    """An activity listener: a request this host's instance answered added the prompt
    tokens it evaluated and the tokens it generated to the slot it ran in."""

    def __init__(self, saves: Grown) -> None:
        self.saves = saves

    def __call__(self, r: Record) -> None:
        if r.host is not None or r.instance is None or r.status != 200:
            return
        # Without llama-server's timings (a route that drops them), the whole prompt.
        prompt = r.prompt_evaluated if r.prompt_evaluated is not None else r.prompt_tokens
        added = (prompt or 0) + (r.completion_tokens or 0)
        if added:
            self.saves.grew(r.instance, added)
