"""The official `openai` client through a real llamad and llama-server: a table of calls,
each checking what comes back (docs/clients.md lists the same rows)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from client_helpers import (
    AUTH,
    IMAGE,
    KEY,
    LISTED,
    PER_REQUEST,
    SCHEMA,
    advertised,
    client_gateway,
    finished_json,
    follows_schema,
    is_json_prefix,
    prompt_of,
    refused,
)
from gateway_helpers import TINY, Gw, gateway
from helpers import stand_in_binary, wait_for

HI = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def models(c: openai.OpenAI, gw: Gw) -> None:
    listed = {m.id: m for m in c.models.list().data}
    assert set(listed) == LISTED
    assert (listed["gpt-4o-mini"].model_extra or {})["llamad"]["alias_of"] == "tiny"
    assert c.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    assert c.models.retrieve("emb").id == "emb"  # never loads it
    with pytest.raises(openai.NotFoundError) as info:
        c.models.retrieve("nope")
    assert info.value.code == "model_not_found"


def chat(c: openai.OpenAI, gw: Gw) -> None:
    reply = c.chat.completions.create(model="gpt-4o-mini", messages=HI, max_tokens=3)
    assert reply.model == "gpt-4o-mini"
    assert reply.choices[0].finish_reason == "length"
    assert c.chat.completions.create(model="tiny", messages=HI, max_tokens=1).model == "tiny"


def stream(c: openai.OpenAI, gw: Gw) -> None:
    chunks = list(
        c.chat.completions.create(model="gpt-4o-mini", messages=HI, max_tokens=4, stream=True)
    )
    assert {ch.model for ch in chunks} == {"gpt-4o-mini"}
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)


def completions(c: openai.OpenAI, gw: Gw) -> None:
    done = c.completions.create(model="gpt-4o-mini", prompt="hi", max_tokens=3)
    assert done.model == "gpt-4o-mini"
    assert done.choices[0].text
    chunks = list(c.completions.create(model="gpt-4o-mini", prompt="hi", max_tokens=3, stream=True))
    assert {ch.model for ch in chunks} == {"gpt-4o-mini"}


def responses(c: openai.OpenAI, gw: Gw) -> None:
    answer = c.responses.create(model="gpt-4o-mini", input="hi", max_output_tokens=3)
    assert answer.model == "gpt-4o-mini"
    assert answer.output_text
    events = list(
        c.responses.create(model="gpt-4o-mini", input="hi", max_output_tokens=3, stream=True)
    )
    # llama-server leaves `model` out of some events; where it is, it is the name asked.
    assert {e.response.model for e in events if hasattr(e, "response")} - {None} == {"gpt-4o-mini"}


def embeddings(c: openai.OpenAI, gw: Gw) -> None:
    got = c.embeddings.create(model="nomic-embed-text", input=["a", "b"])
    assert got.model == "nomic-embed-text"
    assert len(got.data) == 2
    assert len(got.data[0].embedding) == 64
    with pytest.raises(openai.BadRequestError):  # this instance serves no embeddings
        c.embeddings.create(model="tiny", input="a")


def tools(c: openai.OpenAI, gw: Gw) -> None:
    reply = c.chat.completions.create(
        model="tiny", messages=HI, max_tokens=3, tools=[TOOL], tool_choice="auto"
    )
    assert reply.choices[0].finish_reason in ("length", "stop", "tool_calls")


def json_mode(c: openai.OpenAI, gw: Gw) -> None:
    fmt = {"type": "json_object"}
    for tokens in (12, 48):
        reply = c.chat.completions.create(
            model="tiny",
            messages=HI,
            max_tokens=tokens,
            response_format=fmt,  # type: ignore[arg-type]
        )
        text = reply.choices[0].message.content or ""
        assert is_json_prefix(text), text
        assert text.startswith("{"), text
        if reply.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(text), dict)

    def finished(seed: int) -> tuple[str, bool]:
        reply = c.chat.completions.create(
            model="tiny", messages=HI, max_tokens=200, seed=seed, response_format=fmt
        )
        choice = reply.choices[0]
        return choice.message.content or "", choice.finish_reason == "stop"

    assert isinstance(finished_json(finished), dict)
    answer = c.responses.create(
        model="tiny", input="hi", max_output_tokens=12, text={"format": {"type": "json_object"}}
    )
    assert answer.output_text.startswith("{")
    assert is_json_prefix(answer.output_text)
    done = c.completions.create(
        model="tiny", prompt="hi", max_tokens=12, extra_body={"response_format": fmt}
    )
    assert done.choices[0].text.lstrip().startswith("{")
    assert is_json_prefix(done.choices[0].text)


def json_schema(c: openai.OpenAI, gw: Gw) -> None:
    """A schema the client sends is enforced as it is, not widened to any object."""
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    reply = c.chat.completions.create(
        model="tiny",
        messages=HI,
        max_tokens=30,
        response_format=fmt,  # type: ignore[arg-type]
    )
    assert follows_schema(reply.choices[0].message.content or "")
    answer = c.responses.create(
        model="tiny",
        input="hi",
        max_output_tokens=30,
        text={"format": {"type": "json_schema", "name": "a", "schema": SCHEMA}},
    )
    assert follows_schema(answer.output_text)


def vision(c: openai.OpenAI, gw: Gw) -> None:
    """A model with an mmproj reads the image: the prompt grows by its embeddings."""
    text = {"type": "text", "text": "what"}
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}}
    usage = []
    for content in ([text], [text, image]):
        reply = c.chat.completions.create(
            model="eyes",
            messages=[{"role": "user", "content": content}],  # type: ignore[misc]
            max_tokens=2,
        )
        assert reply.model == "eyes"
        assert reply.choices[0].message.content
        assert reply.usage is not None
        usage.append(reply.usage.prompt_tokens)
    assert usage[1] > usage[0]


def client_mistakes(c: openai.OpenAI, gw: Gw) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="nope", messages=HI, max_tokens=1)
    assert info.value.code == "model_not_found"
    image = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}}]
    with pytest.raises(openai.BadRequestError):  # llama-server's 500: the client's mistake
        c.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": image}],
            max_tokens=1,  # type: ignore[list-item]
        )
    with (
        openai.OpenAI(base_url=f"{gw.base}/v1", api_key="wrong", max_retries=0) as wrong,
        pytest.raises(openai.AuthenticationError) as denied,
    ):
        wrong.models.list()
    assert denied.value.code == "invalid_api_key"
    # Routes the gateway lacks, and wrong methods, outside /api and /v1/messages.
    routes = [
        ("GET", "/v1/nope", 404),
        ("POST", "/nope", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/v1/models", 405),
    ]
    for body in refused(gw, routes, AUTH):
        assert set(body["error"]) == {"message", "type", "param", "code"}


def context(c: openai.OpenAI, gw: Gw) -> None:
    n_ctx = advertised(gw, "tiny")
    assert n_ctx == PER_REQUEST
    # The prompt may fill the context but for the one token it must answer with.
    fits = c.completions.create(model="tiny", prompt=prompt_of(n_ctx - 1), max_tokens=1)
    assert fits.usage is not None
    assert fits.usage.prompt_tokens == n_ctx - 1
    with pytest.raises(openai.BadRequestError) as info:
        c.completions.create(model="tiny", prompt=prompt_of(n_ctx), max_tokens=1)
    assert info.value.code == "exceed_context_size_error" or "context" in str(info.value)


def passthrough(c: openai.OpenAI, gw: Gw) -> None:
    """llama-server's own documents, relayed: `model_path` is the name asked for (the
    scan of every answer, client_helpers.scanned, finds no file path in the rest)."""
    props = httpx.get(f"{gw.base}/props", params={"model": "gpt-4o-mini"}, headers=AUTH)
    assert props.json()["model_path"] == "gpt-4o-mini"
    assert props.json()["default_generation_settings"]["n_ctx"] == PER_REQUEST
    upstream = httpx.get(f"{gw.base}/upstream/tiny/props", headers=AUTH).json()
    assert upstream["model_path"] == "tiny"
    for path in ("slots", "v1/models", "models", "lora-adapters", "health", ""):
        answer = httpx.get(f"{gw.base}/upstream/tiny/{path}", headers=AUTH, timeout=10)
        assert answer.status_code == 200, path


CALLS: list[Callable[[openai.OpenAI, Gw], None]] = [
    models, chat, stream, completions, responses, embeddings, tools, json_mode, json_schema,
    vision,
    client_mistakes, context, passthrough,
]  # fmt: skip


@pytest.mark.timeout(180)
def test_openai_client_table(tiny_model: Path, tmp_path: Path) -> None:
    with (
        client_gateway(tiny_model, tmp_path) as gw,
        openai.OpenAI(base_url=f"{gw.base}/v1", api_key=KEY, max_retries=0, timeout=60) as client,
    ):
        for call in CALLS:
            call(client, gw)


@pytest.mark.timeout(60)
def test_aliases_can_be_left_out_of_the_listings(tiny_model: Path) -> None:
    """`[gateway] list_aliases = false`: the listings name instances only; the alias still
    answers, and `llamad.aliases` still tells it."""
    tiny = {**TINY, "aliases": ["gpt-4o-mini"]}
    with gateway(tiny_model, {"tiny": tiny}, list_aliases=False) as gw:
        listed = gw.models()
        assert set(listed) == {"tiny"}
        assert listed["tiny"]["llamad"]["aliases"] == ["gpt-4o-mini"]
        tags = httpx.get(f"{gw.base}/api/tags", timeout=10).json()["models"]
        assert [t["name"] for t in tags] == ["tiny:latest"]
        with openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none", max_retries=0) as c:
            assert c.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
            reply = c.chat.completions.create(model="gpt-4o-mini", messages=HI, max_tokens=1)
            assert reply.model == "gpt-4o-mini"


@pytest.mark.timeout(60)
def test_listings_answer_while_a_model_loads(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    """Every listing answers while a load is held back, and the model is still loading
    once they have: none waited on it."""
    go = tmp_path / "go"
    binary = tmp_path / "llama-server"
    hold = f'while [ ! -e "{go}" ]; do sleep 0.05; done\nexec "{llama_server}" "$@"'
    stand_in_binary(binary, llama_server, serve=hold)
    held = {**TINY, "on_demand": True}
    with gateway(tiny_model, {"held": held}, daemon={"llama_server": str(binary)}) as gw:
        body = {"model": "held", "messages": HI, "max_tokens": 1}
        asked = threading.Thread(
            target=lambda: httpx.post(f"{gw.base}/v1/chat/completions", json=body, timeout=30)
        )
        asked.start()
        try:
            wait_for(lambda: gw.state("held") == "starting", 10, "the load under way")
            for answer in [
                httpx.get(f"{gw.base}/v1/models", timeout=5),
                httpx.get(f"{gw.base}/v1/models/held", timeout=5),
                httpx.get(f"{gw.base}/api/tags", timeout=5),
                httpx.get(f"{gw.base}/api/ps", timeout=5),
                httpx.post(f"{gw.base}/api/show", json={"model": "held"}, timeout=5),
            ]:
                assert answer.status_code == 200, answer.request.url
            assert gw.state("held") == "starting"
        finally:
            go.touch()
            asked.join(30)
        assert gw.state("held") == "running"
