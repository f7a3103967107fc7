"""Renaming the answer's `model` chunk by chunk, llama-server's own documents without file
paths, and JSON mode's bodies (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.jsonmode import enforce
from llamad.gateway.relay.naming import Renamer, renamer

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
    assert renamer(view("tiny"), "tiny") is None
    assert renamer(view(None), "tiny") is None  # a fleet peer
    assert renamer(view("tiny"), "gpt-4o-mini") is not None


def scrubbed(raw: bytes, path: Path | None, size: int = 7) -> bytes:
    """`raw` relayed as llama-server's own document, in chunks of `size` bytes."""
    rewrite = renamer(view("tiny", path), "gpt-4o-mini", document=True)
    assert rewrite is not None
    return b"".join(rewrite(raw[i : i + size]) for i in range(0, len(raw), size)) + (
        rewrite.flush()
    )


def test_documents_passed_through_name_no_file() -> None:
    props = {"model_path": "/home/u/.cache/llama.cpp/x.gguf", "n": 0.8, "t": "</s>é"}
    out = json.loads(scrubbed(json.dumps(props).encode(), None))
    assert out == {"model_path": "gpt-4o-mini", "n": 0.8, "t": "</s>é"}  # a hub model too
    loras = [{"id": 0, "path": "/m/adapters/a.gguf", "scale": 1.0}]
    assert json.loads(scrubbed(json.dumps(loras).encode(), None))[0]["path"] == "a.gguf"
    meta = {"meta": {"where": "loaded /m/tiny.gguf at start"}}
    out = json.loads(scrubbed(json.dumps(meta).encode(), Path("/m/tiny.gguf")))
    assert out == {"meta": {"where": "loaded gpt-4o-mini at start"}}


def test_what_is_not_json_passes_as_it_came() -> None:
    page = b"<!doctype html><p>/m/tiny.gguf {}</p>"
    assert scrubbed(page, Path("/m/tiny.gguf")) == page
    assert scrubbed(b"", None) == b""


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
