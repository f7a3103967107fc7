"""Claude-Code-shaped turns on the real model: the billing block's `cch` changes every
request, and the second turn still evaluates only what it added (issue #38's target)."""

from __future__ import annotations

from pathlib import Path

import anthropic
import pytest
from gemma_gateway import activity, gemma_gateway
from helpers import wait_for

pytestmark = pytest.mark.timeout(120)
COLD = {"temperature": 0}  # this anthropic client has no `temperature` argument


def system(cch: str) -> list[anthropic.types.TextBlockParam]:
    header = f"x-anthropic-billing-header: cc_version=2.1.42.834; cc_entrypoint=cli; cch={cch};"
    return [
        {"type": "text", "text": header},
        {"type": "text", "text": "You are a helpful assistant. Answer in one short sentence."},
    ]


def test_the_second_turn_evaluates_only_its_new_tokens(
    real_model: Path, real_model_template: Path
) -> None:
    with (
        gemma_gateway(real_model, real_model_template) as (base, _),
        anthropic.Anthropic(base_url=base, api_key="none", max_retries=0) as client,
    ):
        turn: list[anthropic.types.MessageParam] = [
            {"role": "user", "content": "What is the capital of France?"}
        ]
        first = client.messages.create(
            model="gemma", max_tokens=8, system=system("65abc"), messages=turn, extra_body=COLD
        )
        said = "".join(b.text for b in first.content if b.type == "text")
        turn += [{"role": "assistant", "content": said}, {"role": "user", "content": "And Italy?"}]
        second = client.messages.create(
            model="gemma", max_tokens=8, system=system("1f2e3"), messages=turn, extra_body=COLD
        )
        records = wait_for(lambda: len(activity(base)) >= 2 and activity(base), 5)
    before = first.usage.input_tokens + (first.usage.cache_read_input_tokens or 0)
    after = second.usage.input_tokens + (second.usage.cache_read_input_tokens or 0)
    added = after - before  # the answer, the new question and their turn marks
    # llama-server keeps sliding-window checkpoints: a few of the old tail are redone.
    assert second.usage.input_tokens <= added + 8, (before, after, second.usage)
    assert (second.usage.cache_read_input_tokens or 0) >= before - 8
    # The activity record says the same (Anthropic's answers carry no timings).
    assert records[0]["prompt_evaluated"] == second.usage.input_tokens
    assert records[0]["prompt_cached"] == second.usage.cache_read_input_tokens
    assert records[0]["prompt_tokens"] == after
