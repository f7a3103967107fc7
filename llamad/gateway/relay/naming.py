"""The answer's `model` is the name the client asked for, never a file path.

llama-server names the model in its answers by its alias, which llamad sets to the
instance's name, so most answers pass through untouched. Only when the client asked by
another name (an alias of the instance) or the server names it otherwise (mlx pins its
own) does `Renamer` swap the name in each chunk: a byte replacement of the exact
`"model":"NAME"` pair, which cannot match inside a JSON string (its quotes would be
escaped there), so nothing is parsed per chunk. llama-server's own documents (`/props`, the
`/upstream/...` GETs) are rewritten whole instead, without file paths (upstream_docs.py).
"""

from __future__ import annotations

import json
from typing import Protocol

from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.upstream_docs import DocScrub

# Compact (llama-server, nlohmann) and Python's default separators (mlx_lm.server).
_SEPARATORS = (b":", b": ")


class Rewrite(Protocol):
    """What the relay applies to an answer: each chunk, then what is held at its end."""

    def __call__(self, chunk: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class Renamer:
    """Rewrites `"model": served` to `"model": asked` in a stream of chunks."""

    def __init__(self, served: str, asked: str) -> None:
        name, old, new = (json.dumps(text).encode() for text in ("model", served, asked))
        self.pairs = [(name + sep + old, name + sep + new) for sep in _SEPARATORS]
        self.longest = max(len(old) for old, _ in self.pairs)
        # Bytes a pair is made of: a chunk ending in another (an SSE event's blank line,
        # a JSON body's `}` unless a name holds one) cannot end inside a pair.
        self.inside = frozenset(b for old, _ in self.pairs for b in old)
        self.held = b""

    def __call__(self, chunk: bytes) -> bytes:
        """`chunk` renamed; a tail that may be the start of a pair split across chunks is
        held back until the next one (an SSE event ends in a blank line, so in practice
        nothing is)."""
        data = self.held + chunk if self.held else chunk
        for old, new in self.pairs:
            if old in data:
                data = data.replace(old, new)
        keep = self._partial_tail(data) if data and data[-1] in self.inside else 0
        self.held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def flush(self) -> bytes:
        """What is held back, at the end of the answer."""
        held, self.held = self.held, b""
        return held

    def _partial_tail(self, data: bytes) -> int:
        # The longest suffix of `data` that is a proper prefix of a pair. A pair starts
        # with a quote, so only suffixes that start at one are tried, longest first.
        low = max(0, len(data) - self.longest + 1)
        at = data.find(b'"', low)
        while at != -1:
            tail = data[at:]
            if any(old.startswith(tail) for old, _ in self.pairs):
                return len(tail)
            at = data.find(b'"', at + 1)
        return 0


def renamer(upstream: Upstream, asked: str, document: bool = False) -> Rewrite | None:
    """What the answer needs rewritten, if anything: a `document` of llama-server's own
    (a GET passed through) without file paths; else the model's name when its server
    gives another than the one asked for."""
    if document:
        return DocScrub(asked, upstream.model_path)
    served = upstream.answer_name
    if served is None or served == asked:
        return None
    return Renamer(served, asked)
