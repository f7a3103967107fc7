"""More conversations than slots, on the real model through the gateway: three
conversations taking turns on a two-slot instance, and none is read again from its start
when its turn comes back. llama-server keeps the prompts its slots let go in host memory
(`--cache-ram`, on by default) and takes them back when a request's prompt starts with
one: the first test guards that llamad keeps it so for the sliding-window model it runs
with `swa_full`; the second, that conversations beyond the slots outlive a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from gemma_gateway import gemma_gateway
from helpers import Llamad

pytestmark = pytest.mark.timeout(240)


def _story(who: str) -> str:
    return " ".join(f"Day {n}: keeper {who} counted {n * 7} ships." for n in range(1, 25))


def _ask(base: str, messages: list[dict[str, Any]], turn: int) -> int:
    """One turn of `messages` (the answer and the next question added to it); returns
    the prompt tokens it evaluated."""
    body = {"model": "gemma", "messages": messages, "max_tokens": 4, "temperature": 0}
    answer = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=120).json()
    messages += [answer["choices"][0]["message"]]
    messages += [{"role": "user", "content": f"And on day {turn + 4}?"}]
    evaluated: int = answer["timings"]["prompt_n"]
    return evaluated


def _talks(who: str) -> dict[str, list[dict[str, Any]]]:
    return {w: [{"role": "user", "content": f"{_story(w)}\nHow many ships on day 3?"}] for w in who}


def test_a_third_conversation_on_two_slots_is_not_read_again(
    real_model: Path, real_model_template: Path
) -> None:
    talks = _talks("ABC")
    evaluated: dict[str, list[int]] = {who: [] for who in talks}
    with gemma_gateway(real_model, real_model_template, ctx_size=2048, n_parallel=2) as (base, _):
        for turn in range(2):
            for who, messages in talks.items():
                evaluated[who].append(_ask(base, messages, turn))
    for who, counts in evaluated.items():
        assert counts[0] > 250, (who, counts)
        # The answer and the new question only, never the story again.
        assert counts[1] < 40, (who, counts)


def test_two_conversations_on_one_slot_outlive_a_restart(
    real_model: Path, real_model_template: Path
) -> None:
    """Each turn is saved in the background; the conversation the slot let go is kept
    beside the slot's own, and after a restart neither is read again."""
    talks = _talks("AB")
    daemon = {"cache_save_tokens": 100, "cache_save_interval": 0.5}
    with gemma_gateway(real_model, real_model_template, daemon) as (base, ld):
        for n, messages in enumerate(talks.values()):
            assert _ask(base, messages, 0) > 250
            ld.wait_event("cache.saved", count=n + 1, why="turn")
        _restart(ld, "gemma")
        evaluated = {who: _ask(base, messages, 1) for who, messages in talks.items()}
    assert [e["into"] for e in ld.events("cache.restored")] == [0, 0]
    assert all(n < 40 for n in evaluated.values()), evaluated


def _restart(ld: Llamad, name: str) -> None:
    pid = ld.running(name)
    ld.api("POST", f"/v1/instances/{name}/restart?wait=120", timeout=130)
    ld.wait_running(name, 120, not_pid=pid)
