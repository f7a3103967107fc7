"""The official `anthropic` client through a real llamad and llama-server (llama-server
implements /v1/messages itself): a table of calls, each checking what comes back."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from unittest.mock import ANY

import anthropic
import pytest
from client_helpers import IMAGE, KEY, advertised, client_gateway, prompt_of, refused
from gateway_helpers import Gw

HI: list[anthropic.types.MessageParam] = [{"role": "user", "content": "hi"}]
PNG: anthropic.types.Base64ImageSourceParam = {
    "type": "base64",
    "media_type": "image/png",
    "data": IMAGE,
}


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


def vision(c: anthropic.Anthropic, gw: Gw) -> None:
    """A model with an mmproj reads the image: the prompt grows by its embeddings."""
    text: anthropic.types.TextBlockParam = {"type": "text", "text": "what"}
    image: anthropic.types.ImageBlockParam = {"type": "image", "source": PNG}
    seen = [
        c.messages.create(model="eyes", max_tokens=2, messages=[{"role": "user", "content": x}])
        for x in ([text], [text, image])
    ]
    assert all(reply.model == "eyes" and reply.content for reply in seen)
    # llama-server counts the prompt it had cached apart.
    read = [r.usage.input_tokens + (r.usage.cache_read_input_tokens or 0) for r in seen]
    assert read[1] > read[0]


def tools(c: anthropic.Anthropic, gw: Gw) -> None:
    tool: anthropic.types.ToolParam = {"name": "f", "input_schema": {"type": "object"}}
    reply = c.messages.create(model="tiny", max_tokens=3, messages=HI, tools=[tool])
    assert reply.stop_reason in ("max_tokens", "end_turn", "tool_use")


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
    image: list[anthropic.types.MessageParam] = [
        {"role": "user", "content": [{"type": "image", "source": PNG}]}
    ]
    with pytest.raises(anthropic.BadRequestError) as no_mmproj:  # llama-server says 500
        c.messages.create(model="tiny", max_tokens=1, messages=image)
    assert no_mmproj.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "image" in no_mmproj.value.body["error"]["message"]  # type: ignore[index]


def wrong_routes(c: anthropic.Anthropic, gw: Gw) -> None:
    """Any route under /v1/messages the gateway lacks, or a wrong method, is refused in
    Anthropic's shape."""
    routes = [
        ("POST", "/v1/messages/nope", 404),
        ("POST", "/v1/messages/batches", 404),
        ("GET", "/v1/messages", 405),
        ("GET", "/v1/messages/count_tokens", 405),
    ]
    kinds = ["not_found_error"] * 2 + ["invalid_request_error"] * 2
    for body, kind in zip(refused(gw, routes, {"x-api-key": KEY}), kinds, strict=True):
        assert body == {"type": "error", "error": {"type": kind, "message": ANY}}


def broken_stream(c: anthropic.Anthropic, gw: Gw) -> None:
    """llama-server dies mid-stream: the stream ends with Anthropic's `event: error`,
    which the SDK raises, not with a message that merely stops."""
    with c.messages.stream(model="long", max_tokens=100000, messages=HI) as events:
        next(e for e in events if e.type == "content_block_delta")
        os.kill(gw.ld.instance("long")["pid"], signal.SIGKILL)
        with pytest.raises(anthropic.APIStatusError) as broke:
            list(events)
    body = broke.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "broke off" in body["error"]["message"]


CALLS: list[Callable[[anthropic.Anthropic, Gw], None]] = [
    messages, stream, vision, tools, count_tokens, error_shape, wrong_routes, broken_stream,
]  # fmt: skip


@pytest.mark.timeout(180)
def test_anthropic_client_table(tiny_model: Path, tmp_path: Path) -> None:
    with (
        client_gateway(tiny_model, tmp_path) as gw,
        anthropic.Anthropic(base_url=gw.base, api_key=KEY, max_retries=0, timeout=60) as client,
    ):
        for call in CALLS:
            call(client, gw)
