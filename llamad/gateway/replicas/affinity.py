"""Prompt affinity without a tokenizer: which replica holds each prompt prefix, and how
many of its tokens, as that replica's server reported.

As llm-d's "approximate" prefix-cache scorer does, the gateway never tokenizes: it
renders the prompt canonically, cuts it into blocks and chains their hashes, so block
i's hash stands for the whole prefix up to it. A chat is cut per message, up to the last
user turn (what follows it is the answer, cached nowhere yet); a plain prompt in blocks
of BLOCK_CHARS characters. A bounded LRU per model maps each prefix hash to the replica
whose answer reported holding it; the longest prefix found decides. A prompt is entered
only from an answer's own counts (`timings.cache_n` and `prompt_n`: the tokens the
server now holds), never from where a request was sent: an answer that says nothing
leaves the map as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llamad.gateway.relay.billing_header import stable_system

Key = tuple[str, str]  # a replica's (host, instance)

BLOCK_CHARS = 256  # about 64 tokens of English at llm-d's four characters per token
CHARS_PER_TOKEN = 4  # llm-d's estimate, used until a server has counted a prefix


@dataclass(frozen=True)
class Chain:
    """A prompt's chained block hashes, and the characters through each block."""

    hashes: tuple[bytes, ...] = ()
    ends: tuple[int, ...] = ()


def prefix_chain(doc: object) -> Chain:
    """The chained blocks of a request body's prompt (none when it has none)."""
    if not isinstance(doc, dict):
        return Chain()
    messages = doc.get("messages")
    if isinstance(messages, list):
        system = stable_system(doc.get("system"))  # Claude Code's changes every request
        return _chain([_render(m) for m in _through_last_user(messages, system)])
    prompt = doc.get("prompt")
    if isinstance(prompt, str):
        return _chain([prompt[i : i + BLOCK_CHARS] for i in range(0, len(prompt), BLOCK_CHARS)])
    return Chain()


def prefix_hashes(doc: object) -> tuple[bytes, ...]:
    """The chained block hashes of a request body's prompt (none when it has none)."""
    return prefix_chain(doc).hashes


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


def _chain(blocks: list[str]) -> Chain:
    hashes: list[bytes] = []
    ends: list[int] = []
    prev, end = b"", 0
    for block in blocks:
        prev = hashlib.blake2b(prev + block.encode("utf-8", "replace"), digest_size=12).digest()
        end += len(block)
        hashes.append(prev)
        ends.append(end)
    return Chain(tuple(hashes), tuple(ends))


@dataclass(frozen=True)
class Held:
    """A replica that reported holding a prefix, and that prefix's tokens."""

    key: Key
    tokens: int
    blocks: int  # of the prompt looked up, the blocks it covers


class Affinity:
    """The prefix -> (replica, tokens) map of one model, at most `size` prefixes (LRU)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._where: OrderedDict[bytes, tuple[Key, int]] = OrderedDict()

    def lookup(self, hashes: Sequence[bytes]) -> Held | None:
        """The replica of the longest prefix a server reported holding."""
        for n in range(len(hashes), 0, -1):
            found = self._where.get(hashes[n - 1])
            if found is not None:
                self._where.move_to_end(hashes[n - 1])
                return Held(found[0], found[1], n)
        return None

    def reported(self, chain: Chain, key: Key, tokens: int) -> None:
        """`key`'s server answered a prompt with these blocks, saying it now holds
        `tokens` of it: each prefix is held there, its share of them by characters."""
        total = chain.ends[-1] if chain.ends else 0
        for h, end in zip(chain.hashes, chain.ends, strict=True):
            self._where[h] = (key, tokens * end // total if total else 0)
            self._where.move_to_end(h)
        while len(self._where) > self.size:
            self._where.popitem(last=False)
