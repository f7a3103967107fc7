"""The official `anthropic` client through a real llamad and llama-server (llama-server
implements /v1/messages itself): a table of calls, each checking what comes back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anthropic
import httpx
import pytest
from client_helpers import KEY, advertised, client_gateway, prompt_of
from gateway_helpers import Gw

HI: list[anthropic.types.MessageParam] = [{"role": "user", "content": "hi"}]


def messages(c: anthropic.Anthropic, gw: Gw) -> None:
    reply = c.messages.create(model="gpt-4o-mini", max_tokens=3, messages=HI)
    assert reply.model == "gpt-4o-mini"
    assert reply.stop_reason == "max_tokens"
    assert reply.content[0].type == "text"
    assert reply.usage.output_tokens == 3


def stream(c: anthropic.Anthropic, gw: Gw) -> None:
    with c.messages.stream(model="gpt-4o-mini", max_tokens=3, messages=HI) as events:
        final = events.get_final_message()
    assert final.model == "gpt-4o-mini"
    assert final.stop_reason == "max_tokens"


def count_tokens(c: anthropic.Anthropic, gw: Gw) -> None:
    counted = c.messages.count_tokens(model="tiny", messages=HI)
    assert counted.input_tokens > 0


def error_shape(c: anthropic.Anthropic, gw: Gw) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        c.messages.create(model="nope", max_tokens=1, messages=HI)
    body = missing.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert "nope" in body["error"]["message"]
    with (
        anthropic.Anthropic(base_url=gw.base, api_key="wrong", max_retries=0) as wrong,
        pytest.raises(anthropic.AuthenticationError) as denied,
    ):
        wrong.messages.create(model="tiny", max_tokens=1, messages=HI)
    assert denied.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    n_ctx = advertised(gw, "tiny")
    over: list[anthropic.types.MessageParam] = [{"role": "user", "content": prompt_of(n_ctx)}]
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model="tiny", max_tokens=1, messages=over)
    assert info.value.body["type"] == "error"  # type: ignore[index]
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    nowhere = httpx.post(f"{gw.base}/v1/messages/nope", headers={"x-api-key": KEY}, json={})
    assert nowhere.status_code == 404
    assert nowhere.json()["error"]["type"] == "not_found_error"


CALLS: list[Callable[[anthropic.Anthropic, Gw], None]] = [
    messages, stream, count_tokens, error_shape,
]  # fmt: skip


@pytest.mark.timeout(180)
def test_anthropic_client_table(tiny_model: Path, tmp_path: Path) -> None:
    with (
        client_gateway(tiny_model, tmp_path) as gw,
        anthropic.Anthropic(base_url=gw.base, api_key=KEY, max_retries=0, timeout=60) as client,
    ):
        for call in CALLS:
            call(client, gw)
