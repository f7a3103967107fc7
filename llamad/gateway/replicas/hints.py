"""What a request tells the balancer about itself: its prompt's prefix hashes, whether
it wants affinity, and whether another llamad's gateway relayed it here.

Set by the route that read the body, for the lease below it; a context variable, as
the request's activity tally is, so no signature between them changes.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from llamad.gateway.replicas.affinity import opening_blocks, prefix_hashes
from llamad.gateway.replicas.home import opening

# A gateway relaying to a peer's sets it to its own id: serve it there, and count it as
# that gateway's in the status document, so it can tell its own requests from others'.
HOP_HEADER = "x-llamad-hop"
AFFINITY_HEADER = "x-llamad-affinity"  # "off": balance alone decides


@dataclass(frozen=True)
class Hints:
    """The balancer's view of one request."""

    doc: object = field(default=None, repr=False, compare=False)  # hashed only if asked
    affinity: bool = True
    relayed: str | None = None  # the relaying gateway's id: served here, never relayed again

    @cached_property
    def prefix(self) -> tuple[bytes, ...]:
        """The prompt's prefix hashes (none with affinity off), computed on first use:
        a model only one replica serves never needs them."""
        return prefix_hashes(self.doc) if self.affinity else ()

    @cached_property
    def conversation(self) -> bytes | None:
        """The hash naming the prompt's conversation (its opening), for its home replica."""
        return opening(self.prefix, opening_blocks(self.doc)) if self.prefix else None


HINTS: contextvars.ContextVar[Hints | None] = contextvars.ContextVar("hints", default=None)
NONE = Hints()


def current() -> Hints:
    """The hints of the request this code serves (none: a request of our own)."""
    return HINTS.get() or NONE


def hints_of(headers: Iterable[tuple[bytes, bytes]], doc: object) -> Hints:
    """The hints of a request with these (lower-case) headers and parsed body."""
    found = {k: v for k, v in headers if k in (HOP_HEADER.encode(), AFFINITY_HEADER.encode())}
    off = found.get(AFFINITY_HEADER.encode(), b"").strip().lower() in (b"off", b"0", b"false")
    return Hints(
        doc=None if off else doc,
        affinity=not off,
        relayed=_sender(found.get(HOP_HEADER.encode())),
    )


def _sender(value: bytes | None) -> str | None:
    """A relaying gateway's id, as short printable text (never a header's whole value)."""
    if value is None:
        return None
    return value[:32].decode("ascii", "replace").strip() or "-"
