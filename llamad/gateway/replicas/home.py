"""A conversation's home replica: where it goes when this gateway has not seen it served.

Rendezvous hashing (highest random weight) of the conversation's opening over the
replicas' names, never over their order or liveness: every gateway, and the same gateway
after a restart, sends a conversation to the same replica, which holds its slot or the
file its prompt cache saved at the last stop. A replica that comes and goes moves only
the conversations whose home it is. The opening is the prompt through its first user
turn (a plain prompt's first block): the part every later turn of it repeats.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from llamad.gateway.replicas.affinity import Key


def opening(hashes: Sequence[bytes], blocks: int) -> bytes | None:
    """The hash that names a conversation: its prefix chain through `blocks` blocks."""
    if not hashes or blocks <= 0:
        return None
    return hashes[min(blocks, len(hashes)) - 1]


def home(conversation: bytes, replicas: Iterable[Key]) -> Key | None:
    """The replica whose weight for `conversation` is highest (None: no replica)."""
    return max(replicas, key=lambda key: _weight(conversation, key), default=None)


def _weight(conversation: bytes, key: Key) -> bytes:
    name = "\0".join(key).encode("utf-8", "replace")
    return hashlib.blake2b(conversation + b"\0" + name, digest_size=8).digest()
