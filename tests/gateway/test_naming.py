"""Renaming the answer's `model` chunk by chunk, and JSON mode's bodies (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamad.gateway.jsonmode import enforce
from llamad.gateway.naming import Renamer, renamer
from llamad.gateway.port import Upstream

# The generated text holds what looks like the pair, escaped as JSON strings are.
CONTENT = b'{"content":"\\"model\\":\\"tiny\\""}'
CHUNK = b'data: {"id":"x","model":"tiny","choices":[{"delta":' + CONTENT + b"}]}\n\n"


def test_the_name_is_replaced_and_text_that_looks_like_it_is_not() -> None:
    rename = Renamer("tiny", "gpt-4o-mini")
    out = json.loads(rename(CHUNK)[6:])
    assert out["model"] == "gpt-4o-mini"
    assert out["choices"][0]["delta"]["content"] == '"model":"tiny"'
    assert rename.flush() == b""


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_pair_split_across_chunks_is_renamed(size: int) -> None:
    body = b'{"a":1,"model": "default_model","b":[]}'
    rename = Renamer("default_model", "m")
    out = b"".join(rename(body[i : i + size]) for i in range(0, len(body), size))
    assert json.loads(out + rename.flush()) == {"a": 1, "model": "m", "b": []}


def view(answer_name: str | None, path: Path | None = None) -> Upstream:
    return Upstream("http://127.0.0.1:1", {}, "tiny", answer_name=answer_name, model_path=path)


def test_nothing_to_rename_when_the_server_says_the_name_asked() -> None:
    assert renamer(view("tiny"), "tiny", "/v1/chat/completions") is None
    assert renamer(view(None), "tiny", "/v1/chat/completions") is None  # a fleet peer
    assert renamer(view("tiny"), "gpt-4o-mini", "/v1/completions") is not None


def test_props_name_no_file() -> None:
    rename = renamer(view("tiny", Path("/m/tiny.gguf")), "tiny", "/props")
    assert rename is not None
    assert rename(b'{"model_path":"/m/tiny.gguf","n":1}\n') == b'{"model_path":"tiny","n":1}\n'


def test_json_mode_gets_the_smallest_enforced_schema() -> None:
    fmt = {"type": "json_object"}
    chat = json.loads(
        enforce("/v1/chat/completions", json.dumps({"response_format": fmt}).encode())
    )
    assert chat["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    given = {"response_format": {"type": "json_object", "schema": {"type": "array"}}}
    assert enforce("/v1/chat/completions", raw := json.dumps(given).encode()) is raw
    text = {"text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "array"}}}}
    resp = json.loads(enforce("/v1/responses", json.dumps(text).encode()))
    assert resp["response_format"] == {"type": "json_object", "schema": {"type": "array"}}
    done = json.loads(enforce("/v1/completions", json.dumps({"response_format": fmt}).encode()))
    assert done == {"json_schema": {"type": "object"}}
    plain = b'{"messages":[]}'
    assert enforce("/v1/chat/completions", plain) is plain
