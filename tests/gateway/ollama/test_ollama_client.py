"""Ollama's official Python client against the Ollama routes, with real llama-servers."""

from __future__ import annotations

import httpx
import ollama
from helpers import wait_for
from ollama_double import DoubleGateway, OllamaServer


def test_root_and_version_over_http(server: OllamaServer) -> None:
    assert httpx.head(server.url + "/").status_code == 200
    root = httpx.get(server.url + "/")
    assert root.status_code == 200
    assert root.text == "Ollama is running"
    version = httpx.get(server.url + "/api/version").json()["version"]
    # VS Code Copilot refuses anything below 0.6.4.
    assert tuple(int(p) for p in version.split(".")) >= (0, 6, 4)


def test_list_names_every_model_with_latest(client: ollama.Client) -> None:
    models = client.list().models
    assert sorted(m.model for m in models) == ["lazy:latest", "tiny-alias:latest", "tiny:latest"]
    tiny = next(m for m in models if m.model == "tiny:latest")
    assert tiny.details is not None
    assert tiny.details.family == "llama"
    assert tiny.details.quantization_level == "F32"
    assert tiny.size
    assert tiny.size > 0
    assert len({m.digest for m in models}) == 2  # an alias is the same model


def test_show_reads_the_gguf_header(client: ollama.Client) -> None:
    shown = client.show("tiny:latest")
    info = shown.modelinfo or {}
    assert info["general.architecture"] == "llama"
    assert info["general.basename"] == "llamad-tiny"
    assert info["llama.context_length"] == 4096
    assert set(shown.capabilities or []) >= {"completion", "tools", "insert"}
    assert "num_ctx 2048" in (shown.parameters or "")
    assert shown.template
    assert "<|im_start|>" in shown.template


def test_ps_lists_loaded_models_only(client: ollama.Client) -> None:
    running = client.ps().models
    assert [m.model for m in running] == ["tiny:latest"]
    assert running[0].context_length == 2048
    assert running[0].expires_at is not None


def test_chat_whole_and_streamed(client: ollama.Client) -> None:
    messages = [{"role": "user", "content": "Hello"}]
    whole = client.chat("tiny", messages=messages, options={"num_predict": 5, "seed": 1})
    assert whole.done
    assert whole.done_reason == "length"
    assert whole.message.role == "assistant"
    assert whole.message.content
    assert whole.eval_count == 5
    assert whole.prompt_eval_count
    assert whole.prompt_eval_count > 0
    assert whole.total_duration
    assert whole.eval_duration
    assert whole.prompt_eval_duration

    chunks = list(
        client.chat("tiny-alias", messages=messages, stream=True, options={"num_predict": 4})
    )
    assert all(c.model == "tiny-alias" and c.created_at for c in chunks)
    assert [c.done for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert "".join(c.message.content or "" for c in chunks)
    last = chunks[-1]
    assert last.done_reason == "length"
    assert last.eval_count == 4
    assert last.load_duration is not None


def test_generate_whole_streamed_raw_and_suffix(client: ollama.Client) -> None:
    whole = client.generate("tiny:latest", prompt="Once", options={"num_predict": 3})
    assert whole.done
    assert whole.response
    assert whole.eval_count == 3

    chunks = list(client.generate("tiny", prompt="Once", stream=True, options={"num_predict": 3}))
    assert chunks[-1].done
    assert chunks[-1].eval_count == 3
    assert "".join(c.response for c in chunks)

    raw = client.generate("tiny", prompt="Once", raw=True, options={"num_predict": 2})
    assert raw.eval_count == 2
    assert raw.done_reason == "length"

    # Fill in the middle: the tiny model has FIM tokens, so llama-server's /infill serves it.
    fim = client.generate("tiny", prompt="def f(", suffix="return 1", options={"num_predict": 2})
    assert fim.done
    assert fim.eval_count == 2


def test_embed_and_legacy_embeddings(client: ollama.Client) -> None:
    out = client.embed("tiny", input=["hello", "world"])
    assert len(out.embeddings) == 2
    assert len(out.embeddings[0]) == 64  # the tiny model's n_embd
    one = client.embed("tiny", input="hello")
    assert len(one.embeddings) == 1
    legacy = client.embeddings("tiny", prompt="hello")
    assert len(legacy.embedding) == 64


def test_keep_alive_zero_unloads_an_on_demand_model(
    client: ollama.Client, gateway: DoubleGateway
) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    reply = client.chat("lazy", messages=messages, keep_alive=0, options={"num_predict": 2})
    assert reply.done
    # keep_alive reached the gateway as 0 seconds, and the gateway unloaded the model.
    assert gateway.slots["lazy"].leases == [0.0]
    wait_for(lambda: not gateway.slots["lazy"].view.loaded, 10, "lazy unloaded")
    assert [m.model for m in client.ps().models] == ["tiny:latest"]


def test_keep_alive_duration_and_load_only(client: ollama.Client, gateway: DoubleGateway) -> None:
    # An empty message list only loads the model (Open WebUI and `ollama run` do this).
    loaded = client.chat("lazy", messages=[], keep_alive="30m")
    assert loaded.done
    assert loaded.done_reason == "load"
    assert gateway.slots["lazy"].leases == [1800.0]
    assert "lazy:latest" in [m.model for m in client.ps().models]
    # Negative keeps it forever; an empty prompt with keep_alive 0 unloads it.
    client.generate("lazy", prompt="", keep_alive=-1)
    assert gateway.slots["lazy"].leases[-1] == -1.0
    unloaded = client.generate("lazy", prompt="", keep_alive=0)
    assert unloaded.done_reason == "unload"
    assert not gateway.slots["lazy"].view.loaded


def test_llama_server_takes_every_translated_field(client: ollama.Client) -> None:
    # Each Ollama field below becomes a llama-server parameter; a refusal would be a 4xx.
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    options = {"temperature": 0.2, "top_k": 5, "top_p": 0.9, "min_p": 0.01, "seed": 7}
    options |= {"repeat_penalty": 1.1, "stop": ["\n\n"], "num_predict": 8, "num_ctx": 99999}
    for fmt in ("json", schema):
        reply = client.chat(
            "tiny",
            messages=[{"role": "system", "content": "json"}, {"role": "user", "content": "go"}],
            format=fmt,
            think=False,
            options=options,
        )
        assert reply.done
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    reply = client.chat(
        "tiny", messages=[{"role": "user", "content": "x"}], tools=tools, options={"num_predict": 4}
    )
    assert reply.done
    gen = client.generate("tiny", prompt="x", system="be brief", format="json", options=options)
    assert gen.done


def test_keep_alive_zero_leaves_an_always_on_model_up(
    client: ollama.Client, gateway: DoubleGateway
) -> None:
    reply = client.generate("tiny", prompt="", keep_alive=0)
    assert reply.done_reason == "load"
    assert gateway.slots["tiny"].view.loaded
