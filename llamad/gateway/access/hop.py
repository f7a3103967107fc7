"""The two headers a request tells the balancer with: which gateway relayed it here,
and whether it wants affinity. The door reads them with the others (`door.py`); the
`Call` carries what they say down to the lease, so "never relayed twice" is the door's.
"""

from __future__ import annotations

# A gateway relaying to a peer's sets it to its own id: serve it there, and count it as
# that gateway's in the status document, so it can tell its own requests from others'.
HOP_HEADER = "x-llamad-hop"
AFFINITY_HEADER = "x-llamad-affinity"  # "off": balance alone decides
HOP = HOP_HEADER.encode()
AFFINITY = AFFINITY_HEADER.encode()


def relayed_by(value: bytes | None) -> str | None:
    """A relaying gateway's id, as short printable text (never a header's whole value)."""
    if value is None:
        return None
    return value[:32].decode("ascii", "replace").strip() or "-"


def affinity_on(value: bytes | None) -> bool:
    """Whether a request with this `x-llamad-affinity` value (None: not sent) wants it."""
    return value is None or value.strip().lower() not in (b"off", b"0", b"false")
