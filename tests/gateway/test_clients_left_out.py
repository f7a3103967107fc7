"""What clients ask that llama-server leaves out, on the tiny model: Ollama's tagged
names on every route, `think` for a model that cannot think, `echo`, `n` > 1
(docs/clients.md names these tests in its rows)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from client_helpers import THINKING
from gateway_helpers import TINY, Gw, gateway
from helpers import wait_for

pytestmark = pytest.mark.timeout(120)

HI = [{"role": "user", "content": "hi"}]
INSTANCES = {
    "tiny": {**TINY, "n_parallel": 2, "ctx_size": 512},
    "emb": {**TINY, "embeddings": True, "pooling": "mean", "on_demand": True},
    "pair": {**TINY, "chat_template": THINKING, "on_demand": True},
}
ALICE = "alice-secret-0123456789"
AUTH = {"Authorization": f"Bearer {ALICE}"}


def _key(path: Path, secret: str) -> str:
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def gw(tiny_model: Path, tmp_path: Path) -> Iterator[Gw]:
    """The gateway, behind a key `alice` limited to its models by name."""
    d = tmp_path
    keys = {"alice": {"key_file": _key(d / "alice.key", ALICE), "models": list(INSTANCES)}}
    main = _key(d / "main.key", "main-secret-0123456789")
    with gateway(tiny_model, INSTANCES, api_key_file=main, keys=keys) as gw:
        yield gw


@pytest.fixture
def oai(gw: Gw) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{gw.base}/v1", api_key=ALICE, max_retries=0, timeout=60) as c:
        yield c


def test_tagged_names_resolve_on_every_route(gw: Gw, oai: openai.OpenAI) -> None:
    """`tiny:latest`, as /api/tags lists it, works on the five OpenAI and Anthropic routes
    and Ollama's, for a key limited to `tiny`; each answer names the model as asked."""
    name = "tiny:latest"
    with (
        anthropic.Anthropic(base_url=gw.base, api_key=ALICE, max_retries=0, timeout=60) as a,
        ollama.Client(host=gw.base, headers=AUTH) as o,
    ):
        chat = oai.chat.completions.create(model=name, messages=HI, max_tokens=2)  # type: ignore[arg-type]
        assert chat.model == name
        done = oai.completions.create(model=name, prompt="hi", max_tokens=2)
        assert done.model == name
        answer = oai.responses.create(model=name, input="hi", max_output_tokens=2)
        assert answer.model == name
        got = oai.embeddings.create(model="emb:latest", input="a")
        assert got.model == "emb:latest"
        assert len(got.data) == 1
        message = a.messages.create(model=name, max_tokens=2, messages=HI)  # type: ignore[arg-type]
        assert message.model == name
        assert o.chat(model=name, messages=HI, options={"num_predict": 2}).model == name
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model="nope:latest", messages=HI, max_tokens=1)  # type: ignore[arg-type]
    refused = httpx.post(
        f"{gw.base}/v1/chat/completions",
        json={"model": "tiny:other", "messages": HI, "max_tokens": 1},
        headers=AUTH,
        timeout=10,
    )
    assert refused.status_code == 404  # only the tag the listing shows


def test_think_on_a_model_that_cannot_is_ollamas_400(gw: Gw) -> None:
    """`think` for a model whose template cannot think: Ollama's 400, on chat and
    generate; `think: false` and a model whose template thinks are served."""
    with ollama.Client(host=gw.base, headers=AUTH, timeout=60) as o:
        for call in (
            lambda: o.chat(model="tiny:latest", messages=HI, think=True),
            lambda: o.generate(model="tiny", prompt="hi", think="high"),
        ):
            with pytest.raises(ollama.ResponseError) as info:
                call()
            assert info.value.status_code == 400
            assert info.value.error in ('"tiny:latest" does not support thinking',
                                        '"tiny" does not support thinking')  # fmt: skip
        opts = {"num_predict": 2}
        assert o.chat(model="tiny", messages=HI, think=False, options=opts).done
        assert o.chat(model="pair", messages=HI, think=True, options=opts).done


def test_n_choices_and_echo(oai: openai.OpenAI) -> None:
    """`n=3` gives three choices, whole and streamed (each chunk with its index), usage
    summed; `echo` prepends the prompt to each choice's text."""
    reply = oai.chat.completions.create(model="tiny", messages=HI, max_tokens=3, n=3)  # type: ignore[arg-type]
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert reply.model == "tiny"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 9  # three choices cut at 3 tokens
    chunks = list(
        oai.chat.completions.create(
            model="tiny", messages=HI, max_tokens=2, n=3, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert {c.index for ch in chunks for c in ch.choices} == {0, 1, 2}
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6
    done = oai.completions.create(model="tiny", prompt="Once upon", max_tokens=2, echo=True, n=2)
    assert [c.text.startswith("Once upon") for c in done.choices] == [True, True]
    assert len(done.choices[0].text) > len("Once upon")
    streamed = list(
        oai.completions.create(model="tiny", prompt="Once", max_tokens=2, echo=True, stream=True)
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices).startswith("Once")


# A tool the tiny model can only finish: one boolean (the grammar forbids anything else).
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
        "additionalProperties": False}  # fmt: skip
TOOLS = [
    {"type": "function", "function": {"name": "other", "parameters": FLAG}},
    {"type": "function", "function": {"name": "f", "parameters": FLAG}},
]


def test_forced_tool_calls_on_every_family(gw: Gw, oai: openai.OpenAI) -> None:
    """`required` and a named function come back as a call whose arguments follow the
    tool's schema: OpenAI chat (whole, streamed), Responses, Anthropic (`any`, `tool`)."""
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        reply = oai.chat.completions.create(
            model="tiny",
            messages=HI,
            max_tokens=300,
            tools=TOOLS,
            tool_choice=choice,  # type: ignore[arg-type]
        )
        first = reply.choices[0]
        assert first.finish_reason == "tool_calls"
        call = (first.message.tool_calls or [])[0]
        assert isinstance(json.loads(call.function.arguments)["ok"], bool)  # type: ignore[union-attr]
        if choice != "required":
            assert call.function.name == "f"  # type: ignore[union-attr]
    chunks = list(
        oai.chat.completions.create(
            model="tiny", messages=HI, max_tokens=300, tools=TOOLS, stream=True,  # type: ignore[arg-type]
            tool_choice={"type": "function", "function": {"name": "f"}},
        )
    )  # fmt: skip
    calls = [t for ch in chunks for c in ch.choices for t in c.delta.tool_calls or []]
    assert calls[0].function.name == "f"  # type: ignore[union-attr]
    assert {c.finish_reason for ch in chunks for c in ch.choices} >= {"tool_calls"}
    flat = [{"type": "function", "name": "f", "parameters": FLAG}]
    answer = oai.responses.create(
        model="tiny", input="hi", max_output_tokens=300, tools=flat,  # type: ignore[arg-type]
        tool_choice={"type": "function", "name": "f"},
    )  # fmt: skip
    item = answer.output[0]
    assert item.type == "function_call"
    assert isinstance(json.loads(item.arguments)["ok"], bool)
    with anthropic.Anthropic(base_url=gw.base, api_key=ALICE, max_retries=0, timeout=60) as a:
        tools = [{"name": "f", "input_schema": FLAG}]
        for forcing in ({"type": "any"}, {"type": "tool", "name": "f"}):
            message = a.messages.create(
                model="tiny",
                max_tokens=300,
                messages=HI,
                tools=tools,
                tool_choice=forcing,  # type: ignore[arg-type]
            )
            assert message.stop_reason == "tool_use"
            block = message.content[0]
            assert block.type == "tool_use"
            assert isinstance(block.input["ok"], bool)  # type: ignore[index]
        with a.messages.stream(
            model="tiny", max_tokens=300, messages=HI, tools=tools,  # type: ignore[arg-type]
            tool_choice={"type": "tool", "name": "f"},
        ) as stream:  # fmt: skip
            final = stream.get_final_message()
        assert final.stop_reason == "tool_use"
        assert final.content[0].type == "tool_use"


def test_shaped_requests_have_their_token_counts_in_activity(gw: Gw, oai: openai.OpenAI) -> None:
    """`n` (whole and streamed) and a forced call are recorded with their usage: the
    choices' tokens summed, as the answer's own usage says."""
    oai.chat.completions.create(model="tiny", messages=HI, max_tokens=3, n=2)  # type: ignore[arg-type]
    list(oai.chat.completions.create(model="tiny", messages=HI, max_tokens=2, n=3, stream=True))  # type: ignore[arg-type]
    forced = oai.chat.completions.create(
        model="tiny",
        messages=HI,
        max_tokens=300,
        tools=TOOLS,
        tool_choice="required",  # type: ignore[arg-type]
    )
    main = {"Authorization": "Bearer main-secret-0123456789"}

    def records() -> list[dict[str, Any]]:
        got = httpx.get(f"{gw.base}/v1/activity?model=tiny", headers=main, timeout=5)
        return list(got.json()["data"])

    done = wait_for(lambda: len(records()) >= 3 and records(), 10)
    by_completion = sorted(done, key=lambda r: r["time"])[-3:]
    assert [r["completion_tokens"] for r in by_completion] == [
        6, 6, forced.usage.completion_tokens,  # type: ignore[union-attr]
    ]  # fmt: skip
    assert all(r["prompt_tokens"] for r in by_completion)


def _streamed(gw: Gw, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data events of a streamed answer, as they came."""
    out = []
    with httpx.stream("POST", f"{gw.base}{path}", json=body, headers=AUTH, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                out.append(json.loads(line[6:]))
    return out


def test_shaped_streams_come_token_by_token(gw: Gw) -> None:
    """`n` choices and a forced call stream as they are generated: each choice's text,
    and the call's arguments, in many deltas, not one (the whole answer's)."""
    chunks = _streamed(gw, "/v1/chat/completions", {
        "model": "tiny", "messages": HI, "max_tokens": 6, "n": 2, "stream": True,
    })  # fmt: skip
    pieces: dict[int, list[str]] = {0: [], 1: []}
    for chunk in chunks:
        for c in chunk["choices"]:
            if c["delta"].get("content"):
                pieces[c["index"]].append(c["delta"]["content"])
    assert [len(p) > 1 for p in pieces.values()] == [True, True], pieces
    assert len({c["id"] for c in chunks}) == 1
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        chunks = _streamed(gw, "/v1/chat/completions", {
            "model": "tiny", "messages": HI, "max_tokens": 300, "stream": True,
            "tools": TOOLS, "tool_choice": choice,
        })  # fmt: skip
        calls = [
            t for ch in chunks for c in ch["choices"] for t in c["delta"].get("tool_calls") or []
        ]
        assert len(calls) > 1, calls  # the arguments as they come
        assert calls[0]["function"]["name"] == "f" or choice == "required"
        arguments = json.loads("".join(t["function"]["arguments"] for t in calls))
        assert isinstance(arguments["ok"], bool)
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_echo_with_logprobs_gives_the_prompt_tokens_null_logprobs(gw: Gw) -> None:
    """llama-server gives no prompt logprobs: the echoed prompt's tokens lead each
    choice's logprobs with a null logprob, the generated ones follow with theirs."""
    body = {"model": "tiny", "prompt": "Once upon", "max_tokens": 2, "echo": True, "logprobs": 1}
    reply = httpx.post(f"{gw.base}/v1/completions", json=body, headers=AUTH, timeout=60).json()
    choice = reply["choices"][0]
    entries = choice["logprobs"]["content"]
    tokens = httpx.post(
        f"{gw.base}/upstream/tiny/tokenize", json={"content": "Once upon"}, headers=AUTH, timeout=10
    ).json()["tokens"]
    assert [e["logprob"] for e in entries[: len(tokens)]] == [None] * len(tokens)
    assert [e["id"] for e in entries[: len(tokens)]] == tokens
    assert all(isinstance(e["logprob"], float) for e in entries[len(tokens) :])
    assert "".join(e["token"] for e in entries) == choice["text"]
    chunks = _streamed(gw, "/v1/completions", {**body, "stream": True})
    first = chunks[0]["choices"][0]
    assert first["text"] == "Once upon"
    assert [e["logprob"] for e in first["logprobs"]["content"]] == [None] * len(tokens)
