"""What the replica tests ask a gateway, local or fleet: a chat, a stream read to its end,
the activity records, and the peak in-flight and queued counts while load runs."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from helpers import wait_for

MODEL = "shared"


def chat(
    base: str, messages: list[dict[str, str]], tokens: int = 8, **headers: str
) -> dict[str, Any]:
    """A plain chat to `shared` through the gateway at `base`; it must answer 200."""
    body = {"model": MODEL, "messages": messages, "max_tokens": tokens}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def stream(base: str, tokens: int = 24) -> str:
    """One streamed chat: "done" when it finished, "error" when an error event ended it."""
    body = {"model": MODEL, "stream": True, "max_tokens": tokens,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    outcome = "cut"
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line == "data: [DONE]":
                return "done" if outcome == "finished" else outcome
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if "error" in event:
                    outcome = "error"
                elif any(c.get("finish_reason") for c in event.get("choices", [])):
                    outcome = "finished"
    return outcome


def activity(base: str, count: int) -> list[dict[str, Any]]:
    """The gateway's last records for `shared`, once `count` ended (oldest first)."""

    def enough() -> list[dict[str, Any]] | None:
        data = httpx.get(f"{base}/v1/activity?model={MODEL}", timeout=5).json()["data"]
        return data if len(data) >= count else None

    found: list[dict[str, Any]] = wait_for(enough, 10, f"{count} requests in the activity")
    return found[::-1]


@contextmanager
def peaks(slots: dict[str, Callable[[], dict[str, Any]]]) -> Iterator[Counter[str]]:
    """The highest `in_flight` (by name) and `queued` (name-queued) each replica's
    status `gateway` object showed, polled while the block runs."""
    found, stop = Counter[str](), threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for name, read in slots.items():
                slot = read()
                found[name] = max(found[name], slot["in_flight"])
                found[name + "-queued"] = max(found[name + "-queued"], slot["queued"])
            stop.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield found
    finally:
        stop.set()
        watcher.join(10)


def converse(
    base: str, names: str, turns: int, where: str, system: str
) -> tuple[dict[str, list[dict[str, str]]], dict[str, set[str]]]:
    """One conversation per letter of `names`, their turns interleaved (balance alone
    would mix them): each turn must reuse at least the previous prompt from the cache.
    Returns the messages and, per conversation, the `where` ("host" or "instance") of
    the activity records that served it."""
    # Each its own system prompt: llama-server gives a new prompt the slot holding the most
    # similar one, so a shared prefix would let one conversation take another's slot.
    talks = {name: [{"role": "system", "content": f"{name}. {system}"}] for name in names}
    homes: dict[str, set[str]] = {name: set() for name in talks}
    seen, cached = 0, dict.fromkeys(talks, 0)
    for turn in range(turns):
        for name, messages in talks.items():
            messages.append({"role": "user", "content": f"turn {turn} of {name}: go on"})
            reply = chat(base, messages)
            seen += 1
            homes[name].add(activity(base, seen)[-1][where])
            timings = reply["timings"]
            assert timings["cache_n"] >= cached[name], (name, turn, timings)
            cached[name] = timings["cache_n"] + timings["prompt_n"]
            messages.append(
                {"role": "assistant", "content": reply["choices"][0]["message"]["content"]}
            )
    return talks, homes
