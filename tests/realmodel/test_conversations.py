"""More conversations than slots, on the real model through the gateway: three
conversations taking turns on a two-slot instance, and none is read again from its start
when its turn comes back. llama-server keeps the prompts its slots let go in host memory
(`--cache-ram`, on by default) and takes them back when a request's prompt starts with
one: this guards that llamad keeps it so for the sliding-window model it runs with
`swa_full`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from gemma_gateway import gemma_gateway

pytestmark = pytest.mark.timeout(240)


def _story(who: str) -> str:
    return " ".join(f"Day {n}: keeper {who} counted {n * 7} ships." for n in range(1, 25))


def test_a_third_conversation_on_two_slots_is_not_read_again(
    real_model: Path, real_model_template: Path
) -> None:
    talks: dict[str, list[dict[str, Any]]] = {
        who: [{"role": "user", "content": f"{_story(who)}\nHow many ships on day 3?"}]
        for who in "ABC"
    }
    evaluated: dict[str, list[int]] = {who: [] for who in talks}
    with gemma_gateway(real_model, real_model_template, ctx_size=2048, n_parallel=2) as (base, _):
        for turn in range(2):
            for who, messages in talks.items():
                body = {"model": "gemma", "messages": messages, "max_tokens": 4, "temperature": 0}
                answer = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=120).json()
                evaluated[who].append(answer["timings"]["prompt_n"])
                messages += [answer["choices"][0]["message"]]
                messages += [{"role": "user", "content": f"And on day {turn + 4}?"}]
    for who, counts in evaluated.items():
        assert counts[0] > 250, (who, counts)
        # The answer and the new question only, never the story again.
        assert counts[1] < 40, (who, counts)
