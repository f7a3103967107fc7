"""Prompt affinity without a tokenizer: which replica last served each prompt prefix.

As llm-d's "approximate" prefix-cache scorer does, the gateway never tokenizes: it
renders the prompt canonically, cuts it into blocks and chains their hashes, so block
i's hash stands for the whole prefix up to it. A chat is cut per message, up to the last
user turn (what follows it is the answer, cached nowhere yet); a plain prompt in blocks
of BLOCK_CHARS characters. A bounded LRU per model maps each prefix hash to the replica
that last served it; the longest prefix found decides.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from llamad.gateway.relay.billing_header import stable_system

Key = tuple[str, str]  # a replica's (host, instance)

BLOCK_CHARS = 256  # about 64 tokens of English at llm-d's four characters per token


def prefix_hashes(doc: object) -> tuple[bytes, ...]:
    """The chained block hashes of a request body's prompt (none when it has none)."""
    if not isinstance(doc, dict):
        return ()
    messages = doc.get("messages")
    if isinstance(messages, list):
        system = stable_system(doc.get("system"))  # Claude Code's changes every request
        return _chain(_render(m) for m in _through_last_user(messages, system))
    prompt = doc.get("prompt")
    if isinstance(prompt, str):
        return _chain(prompt[i : i + BLOCK_CHARS] for i in range(0, len(prompt), BLOCK_CHARS))
    return ()


def opening_blocks(doc: object) -> int:
    """How many of `prefix_hashes(doc)`'s blocks open the conversation: those through its
    first user turn (a plain prompt's first block), which every later turn repeats."""
    if not isinstance(doc, dict):
        return 0
    messages = doc.get("messages")
    if isinstance(messages, list):
        head = 0 if stable_system(doc.get("system")) is None else 1
        first = next((i for i, m in enumerate(messages) if _role(m) == "user"), None)
        return 0 if first is None else head + first + 1
    return 1 if isinstance(doc.get("prompt"), str) and doc["prompt"] else 0


def _through_last_user(messages: list[Any], system: object) -> list[Any]:
    last = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=-1)
    head = [{"role": "system", "content": system}] if system is not None else []
    return head + messages[: last + 1]


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def _render(message: object) -> str:
    """One message as the same text however the client spaced or ordered its keys."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _chain(blocks: Any) -> tuple[bytes, ...]:
    out: list[bytes] = []
    prev = b""
    for block in blocks:
        prev = hashlib.blake2b(prev + block.encode("utf-8", "replace"), digest_size=12).digest()
        out.append(prev)
    return tuple(out)


class Affinity:
    """The prefix -> replica map of one model, at most `size` prefixes (LRU)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._where: OrderedDict[bytes, Key] = OrderedDict()

    def lookup(self, hashes: Sequence[bytes]) -> tuple[Key, int] | None:
        """The replica of the longest known prefix, and how many blocks it covers."""
        for n in range(len(hashes), 0, -1):
            key = self._where.get(hashes[n - 1])
            if key is not None:
                self._where.move_to_end(hashes[n - 1])
                return key, n
        return None

    def served(self, hashes: Sequence[bytes], key: Key) -> None:
        """`key` served a prompt with these prefixes: its cache now holds them."""
        for h in hashes:
            self._where[h] = key
            self._where.move_to_end(h)
        while len(self._where) > self.size:
            self._where.popitem(last=False)
