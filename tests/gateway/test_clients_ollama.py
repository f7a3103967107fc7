"""The official `ollama` client through a real llamad and llama-server: a table of calls,
each checking what comes back (docs/clients.md lists the same rows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import ollama
import pytest
from client_helpers import (
    AUTH,
    IMAGE,
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
from gateway_helpers import Gw
from helpers import wait_for

HI = [{"role": "user", "content": "hi"}]
FEW = {"num_predict": 2}


def probes(c: ollama.Client, gw: Gw) -> None:
    # Apps probe these before they know of a key: open, and nothing but the version.
    assert httpx.get(f"{gw.base}/api/version").json() == {"version": "0.12.0"}
    assert httpx.get(f"{gw.base}/").status_code == 200
    assert httpx.head(f"{gw.base}/").status_code == 200
    denied = httpx.get(f"{gw.base}/api/tags")
    assert denied.status_code == 401
    assert isinstance(denied.json()["error"], str)


def listing(c: ollama.Client, gw: Gw) -> None:
    models = {m.model: m for m in c.list().models}
    assert set(models) == {f"{name}:latest" for name in LISTED}
    assert models["gpt-4o-mini:latest"].digest == models["tiny:latest"].digest
    raw = httpx.get(f"{gw.base}/api/tags", headers=AUTH).json()["models"]
    alias = next(m for m in raw if m["name"] == "gpt-4o-mini:latest")
    assert alias["llamad"] == {"alias_of": "tiny:latest"}


def show(c: ollama.Client, gw: Gw) -> None:
    tiny = c.show("gpt-4o-mini")
    assert set(tiny.capabilities or []) >= {"completion", "tools", "insert"}
    assert not {"embedding", "thinking"} & set(tiny.capabilities or [])
    # The template the instance is given, not the model's, decides tools and thinking.
    assert "thinking" in (c.show("pair").capabilities or [])
    assert "tools" not in (c.show("pair").capabilities or [])
    assert (tiny.modelinfo or {})["llama.context_length"] == 4096  # trained, as Ollama
    assert f"num_ctx {PER_REQUEST}" in (tiny.parameters or "")
    emb = c.show("emb")  # not loaded: its context computed from the spec
    assert "embedding" in (emb.capabilities or [])
    assert "num_ctx 256" in (emb.parameters or "")
    assert gw.state("emb") == "stopped"  # show never loads
    assert "num_ctx 128" in (c.show("pair").parameters or "")  # ctx_size / parallel
    c.generate("pair", prompt="")  # load it: llama-server's own figure from then on
    assert "num_ctx 256" in (c.show("pair").parameters or "")
    assert {m.model: m.context_length for m in c.ps().models}["pair:latest"] == 256


def vision(c: ollama.Client, gw: Gw) -> None:
    """`vision` with an mmproj, shown without loading; then the image is read."""
    assert "vision" in (c.show("eyes").capabilities or [])
    assert "vision" not in (c.show("tiny").capabilities or [])
    assert gw.state("eyes") == "stopped"
    seen = [
        c.chat("eyes", messages=[{"role": "user", "content": "what", **extra}], options=FEW)
        for extra in ({}, {"images": [IMAGE]})
    ]
    assert all(reply.message.content for reply in seen)
    assert (seen[1].prompt_eval_count or 0) > (seen[0].prompt_eval_count or 0)


def ps(c: ollama.Client, gw: Gw) -> None:
    running = {m.model: m for m in c.ps().models}
    assert running["tiny:latest"].context_length == PER_REQUEST


def chat(c: ollama.Client, gw: Gw) -> None:
    reply = c.chat("gpt-4o-mini", messages=HI, options={"num_predict": 3})
    assert reply.model == "gpt-4o-mini"
    assert reply.done
    assert reply.eval_count == 3
    chunks = list(c.chat("tiny", messages=HI, stream=True, options={"num_predict": 3}))
    assert {ch.model for ch in chunks} == {"tiny"}
    assert chunks[-1].done


def tools(c: ollama.Client, gw: Gw) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    reply = c.chat("tiny", messages=HI, tools=[tool], options={"num_predict": 3})
    assert reply.done
    assert reply.done_reason in ("length", "stop")


def generate(c: ollama.Client, gw: Gw) -> None:
    reply = c.generate("tiny", prompt="hi", options={"num_predict": 3})
    assert reply.model == "tiny"
    assert reply.response


def embed(c: ollama.Client, gw: Gw) -> None:
    got = c.embed("nomic-embed-text", input=["a", "b"], keep_alive=0)
    assert got.model == "nomic-embed-text"
    assert len(got.embeddings) == 2
    # keep_alive 0: unloaded once its request ended.
    wait_for(lambda: gw.state("emb") == "idle", 20, "emb unloaded by keep_alive 0")


def json_format(c: ollama.Client, gw: Gw) -> None:
    reply = c.chat("tiny", messages=HI, format="json", options={"num_predict": 16})
    text = reply.message.content or ""
    assert text.startswith("{"), text
    assert is_json_prefix(text), text
    if reply.done_reason == "stop":
        assert isinstance(json.loads(text), dict)
    made = c.generate("tiny", prompt="hi", format="json", options={"num_predict": 16})
    assert made.response.startswith("{")
    assert is_json_prefix(made.response)

    def finished(seed: int) -> tuple[str, bool]:
        options = {"num_predict": 200, "seed": seed}
        reply = c.chat("tiny", messages=HI, format="json", options=options)
        return reply.message.content or "", reply.done_reason == "stop"

    assert isinstance(finished_json(finished), dict)
    # A schema is enforced as it is, not widened to any object.
    given = c.chat("tiny", messages=HI, format=SCHEMA, options={"num_predict": 30})
    assert follows_schema(given.message.content or "")


def logprobs(c: ollama.Client, gw: Gw) -> None:
    reply = c.chat("tiny", messages=HI, logprobs=True, top_logprobs=2, options={"num_predict": 3})
    assert reply.logprobs is not None
    assert len(reply.logprobs) == 3
    assert all(len(lp.top_logprobs or []) == 2 for lp in reply.logprobs)
    assert all(lp.logprob <= 0 for lp in reply.logprobs)
    streamed = list(
        c.generate("tiny", prompt="hi", stream=True, logprobs=True, options={"num_predict": 2})
    )
    assert sum(len(ch.logprobs or []) for ch in streamed) == 2


def errors(c: ollama.Client, gw: Gw) -> None:
    with pytest.raises(ollama.ResponseError) as missing:
        c.chat("nope", messages=HI)
    assert missing.value.status_code == 404
    assert isinstance(missing.value.error, str)
    with (
        ollama.Client(host=gw.base, headers={"Authorization": "Bearer wrong"}) as wrong,
        pytest.raises(ollama.ResponseError) as denied,
    ):
        wrong.list()
    assert denied.value.status_code == 401
    assert isinstance(denied.value.error, str)
    with pytest.raises(ollama.ResponseError) as image:
        c.chat("tiny", messages=[{"role": "user", "content": "hi", "images": [IMAGE]}])
    assert image.value.status_code == 400
    assert "image" in image.value.error
    routes = [
        ("GET", "/api/nope", 404),
        ("POST", "/api/nope/deeper", 404),
        ("GET", "/api/chat", 405),
        ("POST", "/api/tags", 405),
    ]
    for body in refused(gw, routes, AUTH):
        assert isinstance(body["error"], str)


def context(c: ollama.Client, gw: Gw) -> None:
    n_ctx = advertised(gw, "tiny")
    fits = c.generate("tiny", prompt=prompt_of(n_ctx - 1), raw=True, options={"num_predict": 1})
    assert fits.prompt_eval_count == n_ctx - 1
    with pytest.raises(ollama.ResponseError) as over:
        c.generate("tiny", prompt=prompt_of(n_ctx), raw=True, options={"num_predict": 1})
    assert over.value.status_code == 400
    assert "context" in over.value.error


CALLS: list[Callable[[ollama.Client, Gw], None]] = [
    probes, listing, show, vision, ps, chat, tools, generate, embed, json_format, logprobs, errors,
    context,
]  # fmt: skip


@pytest.mark.timeout(180)
def test_ollama_client_table(tiny_model: Path, tmp_path: Path) -> None:
    with (
        client_gateway(tiny_model, tmp_path) as gw,
        ollama.Client(host=gw.base, headers=AUTH, timeout=60) as client,
    ):
        for call in CALLS:
            call(client, gw)
