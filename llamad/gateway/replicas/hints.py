"""What a request tells the balancer about itself: its prompt's prefix hashes, whether
it wants affinity, and whether another llamad's gateway relayed it here.

Made by the lease from the request the door decided (`access/call.py`'s `Call`, passed
down as an argument): the door read the headers, the lease only hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from llamad.gateway.contract.port import Asking
from llamad.gateway.replicas.affinity import (
    CHARS_PER_TOKEN,
    Chain,
    Held,
    opening_blocks,
    prefix_chain,
)
from llamad.gateway.replicas.home import opening


@dataclass(frozen=True)
class Hints:
    """The balancer's view of one request."""

    doc: object = field(default=None, repr=False, compare=False)  # hashed only if asked
    affinity: bool = True
    relayed: str | None = None  # the relaying gateway's id: served here, never relayed again

    @cached_property
    def chain(self) -> Chain:
        """The prompt's chained blocks (none with affinity off), computed on first use:
        a model only one replica serves never needs them."""
        return prefix_chain(self.doc) if self.affinity else Chain()

    @property
    def prefix(self) -> tuple[bytes, ...]:
        """The prompt's prefix hashes (none with affinity off)."""
        return self.chain.hashes

    @cached_property
    def conversation(self) -> bytes | None:
        """The hash naming the prompt's conversation (its opening), for its home replica."""
        return opening(self.prefix, opening_blocks(self.doc)) if self.prefix else None

    def tokens(self, held: Held | None) -> int:
        """The prompt's tokens, estimated without a tokenizer: scaled by characters from
        the tokens a server reported for a prefix of it (`held`), else at
        CHARS_PER_TOKEN characters a token."""
        ends = self.chain.ends
        if not ends:
            return 0
        if held is not None and held.tokens > 0:
            return held.tokens * ends[-1] // max(1, ends[held.blocks - 1])
        return ends[-1] // CHARS_PER_TOKEN


NONE = Hints()


def hints_of(asking: Asking | None) -> Hints:
    """The hints of the request a lease serves (none: a request of our own)."""
    if asking is None:
        return NONE
    affinity = asking.affinity
    return Hints(doc=asking.doc if affinity else None, affinity=affinity, relayed=asking.relayed)
