"""The documents Ollama apps decode, field by field, and the errors bad input gets."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from helpers import wait_for
from ollama_double import DoubleGateway, OllamaServer

# OllamaKit (Enchanted) fails to decode a model without any of these.
OLLAMAKIT_TAG_FIELDS = {"name", "digest", "size", "modified_at", "details"}
OLLAMAKIT_DETAILS = {"format", "family", "parameter_size", "quantization_level"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def test_tags_golden_shape(server: OllamaServer) -> None:
    doc = httpx.get(server.url + "/api/tags").json()
    assert set(doc) == {"models"}
    for entry in doc["models"]:
        # An alias says which model it names.
        alias = {"llamad"} if entry["name"] == "tiny-alias:latest" else set()
        assert set(entry) == OLLAMAKIT_TAG_FIELDS | {"model"} | alias
        assert entry["name"] == entry["model"]
        assert entry["name"].endswith(":latest")
        assert re.fullmatch(r"[0-9a-f]{64}", entry["digest"])
        assert isinstance(entry["size"], int)
        assert TIME.match(entry["modified_at"])
        details = entry["details"]
        assert set(details) == OLLAMAKIT_DETAILS | {"families", "parent_model"}
        assert details["format"] == "gguf"
        assert details["family"] == "llama"
        assert details["families"] == ["llama"]
        assert details["parameter_size"] == "115.52K"
        assert details["quantization_level"] == "F32"
    # The digest is stable from one listing to the next.
    again = httpx.get(server.url + "/api/tags").json()
    assert [m["digest"] for m in again["models"]] == [m["digest"] for m in doc["models"]]


def test_show_golden_shape(server: OllamaServer) -> None:
    # Copilot sends {model}, Continue sends {name}; both must work, tagged or not.
    by_model = httpx.post(server.url + "/api/show", json={"model": "tiny"}).json()
    by_name = httpx.post(server.url + "/api/show", json={"name": "tiny:latest"}).json()
    assert by_model == by_name
    assert {"parameters", "template", "details", "model_info", "capabilities"} <= set(by_model)
    info = by_model["model_info"]
    assert info["general.architecture"] == "llama"
    assert info["general.basename"] == "llamad-tiny"
    assert info["llama.context_length"] == 4096
    assert info["llama.block_count"] == 2
    assert info["llama.attention.head_count"] == 4
    assert info["general.parameter_count"] == 115520
    # The double's instances serve embeddings (--embeddings --pooling mean).
    assert by_model["capabilities"] == ["completion", "tools", "embedding", "insert"]
    assert by_model["parameters"].splitlines() == ["num_ctx 2048", 'stop "</s>"']
    assert ".Suffix" in by_model["template"]  # Continue offers FIM only then
    assert by_model["details"]["family"] == "llama"


def test_ps_golden_shape(server: OllamaServer) -> None:
    (entry,) = httpx.get(server.url + "/api/ps").json()["models"]
    assert set(entry) == {
        "name", "model", "size", "size_vram", "digest", "details", "expires_at", "context_length",
    }  # fmt: skip
    assert TIME.match(entry["expires_at"])


def test_chat_stream_is_ndjson(server: OllamaServer) -> None:
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hi"}],
        "options": {"num_predict": 3},
    }
    with httpx.stream("POST", server.url + "/api/chat", json=body) as r:
        assert r.headers["content-type"] == "application/x-ndjson"
        chunks = [json.loads(line) for line in r.iter_lines() if line]
    for chunk in chunks:
        assert {"model", "created_at", "message", "done"} <= set(chunk)
    last = chunks[-1]
    assert last["done"] is True
    assert last["done_reason"] == "length"
    for key in (
        "total_duration", "load_duration", "prompt_eval_count",
        "prompt_eval_duration", "eval_count", "eval_duration",
    ):  # fmt: skip
        assert isinstance(last[key], int), key


@pytest.mark.parametrize("route", ["/api/chat", "/api/generate", "/api/show", "/api/embed"])
def test_unknown_model_is_404(server: OllamaServer, route: str) -> None:
    r = httpx.post(server.url + route, json={"model": "nope", "prompt": "x", "input": "x"})
    assert r.status_code == 404
    assert r.json() == {"error": 'model "nope" not found'}


def test_gateway_refusal_keeps_its_status_and_retry_after(
    server: OllamaServer, gateway: DoubleGateway
) -> None:
    gateway.add("broken", on_demand=True, fails=True)
    body = {"model": "broken:latest", "messages": [{"role": "user", "content": "Hi"}]}
    r = httpx.post(server.url + "/api/chat", json=body)
    assert r.status_code == 503
    assert r.headers["retry-after"] == "5"
    assert r.json() == {"error": "model 'broken' failed to load: exit 1"}


@pytest.mark.parametrize("route", ["/api/chat", "/api/generate", "/api/show", "/api/embed"])
def test_malformed_json_is_400(server: OllamaServer, route: str) -> None:
    r = httpx.post(server.url + route, content=b'{"model": "tiny",')
    assert r.status_code == 400
    assert set(r.json()) == {"error"}


@pytest.mark.parametrize("stream", ["yes", 1, [], {}])
def test_stream_of_wrong_type_is_400(server: OllamaServer, stream: object) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "stream": stream}
    r = httpx.post(server.url + "/api/chat", json=body)
    assert r.status_code == 400
    assert "stream" in r.json()["error"]


def test_bad_keep_alive_and_missing_model_are_400(server: OllamaServer) -> None:
    r = httpx.post(server.url + "/api/generate", json={"model": "tiny", "keep_alive": "5 parsecs"})
    assert r.status_code == 400
    assert "keep_alive" in r.json()["error"]
    r = httpx.post(server.url + "/api/chat", json={"messages": []})
    assert r.status_code == 400
    assert r.json() == {"error": "model is required"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/pull"),
        ("POST", "/api/push"),
        ("POST", "/api/create"),
        ("POST", "/api/copy"),
        ("DELETE", "/api/delete"),
        ("HEAD", "/api/blobs/sha256:00"),
        ("POST", "/api/blobs/sha256:00"),
    ],
)
def test_model_store_routes_answer_501(server: OllamaServer, method: str, path: str) -> None:
    r = httpx.request(method, server.url + path, json={"model": "tiny"})
    assert r.status_code == 501
    if method != "HEAD":
        assert "llamad.toml" in r.json()["error"]


def test_client_disconnect_mid_stream_stops_generation(
    server: OllamaServer, gateway: DoubleGateway
) -> None:
    slot = gateway.slots["tiny"]

    def generating() -> bool:
        slots = httpx.get(f"http://127.0.0.1:{slot.port}/slots").json()
        return any(s["is_processing"] for s in slots)

    body = {"model": "tiny", "prompt": "go", "options": {"num_predict": -1}}
    with httpx.stream("POST", server.url + "/api/generate", json=body) as r:
        lines = r.iter_lines()
        for _ in range(3):
            assert not json.loads(next(lines))["done"]
        assert generating()
        assert slot.in_flight == 1
    # Closing the client's stream released the lease and stopped llama-server generating.
    wait_for(lambda: slot.in_flight == 0, 10, "the lease released")
    wait_for(lambda: not generating(), 10, "llama-server idle")
