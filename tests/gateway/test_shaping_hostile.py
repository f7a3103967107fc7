"""What the gateway does itself for a client (forced tool calls, `n`, `echo`: shaping/)
against hostile or merely odd requests, on the real llama-server and the tiny model: a
clear 400 in the family's shape, never a 500 or a traceback, and nothing held or left
running once the client has gone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from flood import rss
from gateway_helpers import LONG, Gw, gateway
from helpers import wait_for

pytestmark = pytest.mark.timeout(120)

HI = [{"role": "user", "content": "hi"}]
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": FLAG}}


@pytest.fixture
def gw(tiny_model: Path) -> Iterator[Gw]:
    with gateway(tiny_model, {"tiny": {**LONG, "n_parallel": 4, "ctx_size": 1024}}) as gw:
        yield gw


def _post(gw: Gw, path: str, body: dict[str, Any]) -> httpx.Response:
    data = json.dumps(body).encode()  # ASCII: a lone surrogate goes as its `\ud800` escape
    return httpx.post(f"{gw.base}{path}", content=data, timeout=60)


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": HI, "max_tokens": 3, **fields}


def _nested_types(depth: int) -> dict[str, Any]:
    """~100 bytes a level; each level's `type` list copies all below it 8 times."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": ["object"] * 8, "properties": {"a": schema}}
    return schema


def _forcing(parameters: dict[str, Any]) -> dict[str, Any]:
    fn = {"name": "f", "parameters": parameters}
    return _chat(tools=[{"type": "function", "function": fn}], tool_choice="required")


def _ollama(**message: Any) -> dict[str, Any]:
    said = {"role": "assistant", "content": "", **message}
    options = {"num_predict": 2}
    return {"model": "tiny", "stream": False, "messages": [*HI, said], "options": options}


CHAT, MESSAGES, OLLAMA = "/v1/chat/completions", "/v1/messages", "/api/chat"
ANY = {"type": "any"}
# (route, body, what the 400 says; None: served or refused as llama-server would, no 5xx)
ODD: list[tuple[str, dict[str, Any], str | None]] = [
    (CHAT, _chat(tools=5, tool_choice="required"), "no function"),
    (CHAT, _chat(tools=[{"type": "function", "function": "x"}], tool_choice="required"),
     "no function"),
    (CHAT, _chat(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "g"}}),
     '"g", which is no function'),
    (CHAT, _chat(tool_choice="required"), "no function"),
    (MESSAGES, {"model": "tiny", "max_tokens": 3, "messages": 5, "tool_choice": ANY,
                "tools": [{"name": "f", "input_schema": FLAG}]}, None),
    (MESSAGES, {"model": "tiny", "max_tokens": 3, "tool_choice": ANY,
                "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}],
                "tools": [{"name": "f", "input_schema": FLAG}]}, None),
    (CHAT, _chat(n="3"), "`n` must be an integer from 1 to 128"),
    (CHAT, _chat(n=10**9), "`n` must be"),
    (CHAT, _chat(n=-1), "`n` must be"),
    (CHAT, _chat(n=True), "`n` must be"),
    ("/v1/completions", {"model": "tiny", "prompt": ["a"] * 10_000, "n": 128, "max_tokens": 1},
     "takes one prompt"),
    (CHAT, _chat(n=2, messages=[{"role": "user", "content": "hi \ud800"}]), "lone surrogate"),
    ("/v1/completions", {"model": "tiny", "prompt": "a\ud800", "echo": True}, "lone surrogate"),
    (CHAT, _chat(messages=[{"role": "user", "content": "\udc00 hi"}]), "lone surrogate"),
    (OLLAMA, _ollama(content="hi \ud800"), "lone surrogate"),
    (OLLAMA, _ollama(tool_calls=[5]), None),
    (OLLAMA, _ollama(tool_calls=[{"function": 5}]), None),
    (OLLAMA, _ollama(role="tool", tool_name=5), "'tool_name' has the wrong type"),
    (OLLAMA, _ollama(thinking=5), "'thinking' has the wrong type"),
    (CHAT, _forcing(_nested_types(8)), "too large"),
    (CHAT, _forcing({"type": "object", "properties": {"a": {"enum": list(range(200_000))}}}),
     "too large"),
]  # fmt: skip


def test_odd_requests_get_a_400_in_their_family_shape_and_no_traceback(gw: Gw) -> None:
    """Each odd field the gateway reads itself is a one-line 400, fast (a hostile tool
    schema is refused before the gateway or llama-server build its grammar); the
    daemon logs no failure and serves on."""
    for path, body, said in ODD:
        got = _post(gw, path, body)
        if said is None:
            assert got.status_code < 500, got.text[:300]
            continue
        assert got.status_code == 400, (body, got.text[:300])
        error = got.json()["error"]
        assert said in (error if path == OLLAMA else error["message"]), (said, error)
        if path == MESSAGES:
            assert got.json()["type"] == "error"
    assert gw.ld.events("listener.app_failed") == []
    assert gw.ld.events("ollama.request_failed") == []
    assert _post(gw, CHAT, _chat(n=2)).json()["choices"][1]["index"] == 1
    n2 = _post(gw, CHAT, _chat(n=2.0))  # an integral float is a count all the same
    assert len(n2.json()["choices"]) == 2


def test_echo_with_logprobs_of_a_prompt_past_the_context_holds_no_memory(gw: Gw) -> None:
    """The echoed prompt's tokens are asked for only once llama-server took the prompt:
    a prompt of a body's size (2 MB: two million tokens of the tiny model) is the
    context's 400, and the daemon does not hold its tokens (a GB, before)."""
    before = rss(gw.ld.proc.pid)
    body = {"model": "tiny", "prompt": "ab " * 700_000, "max_tokens": 1, "echo": True,
            "logprobs": 1, "n": 2}  # fmt: skip
    got = _post(gw, "/v1/completions", body)
    assert got.status_code == 400
    assert "context" in got.json()["error"]["message"]
    assert rss(gw.ld.proc.pid) - before < 150 * 2**20
    small = {"model": "tiny", "prompt": "Once upon", "max_tokens": 2, "echo": True,
             "logprobs": 1, "n": 2}  # fmt: skip
    done = _post(gw, "/v1/completions", small).json()
    for choice in done["choices"]:
        assert choice["text"].startswith("Once upon")
        assert choice["logprobs"]["content"][0]["logprob"] is None  # the prompt's first
    streamed = httpx.post(f"{gw.base}/v1/completions", json={**small, "stream": True}, timeout=60)
    lines = streamed.text.splitlines()
    firsts = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    echoes = [c for d in firsts for c in d["choices"] if c["text"].startswith("Once upon")]
    assert len(echoes) == 2
    assert all(c["logprobs"]["content"] for c in echoes)


def test_a_client_leaving_an_n_stream_frees_every_slot_and_its_lease(gw: Gw) -> None:
    """`n: 4` streamed for a long time: the client reads a chunk and leaves; every one of
    the four upstream streams stops and nothing stays in flight."""
    port = gw.ld.instance("tiny")["port"]

    def processing() -> int:
        slots = httpx.get(f"http://127.0.0.1:{port}/slots", timeout=5).json()
        return sum(bool(s["is_processing"]) for s in slots)

    body = _chat(n=4, max_tokens=100_000, stream=True)
    with httpx.stream("POST", f"{gw.base}{CHAT}", json=body, timeout=60) as r:
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data: {"))
        wait_for(lambda: processing() == 4, 20, "four choices generating")
    wait_for(lambda: processing() == 0, 10, "llama-server to stop every choice")
    wait_for(lambda: gw.ld.instance("tiny")["gateway"]["in_flight"] == 0, 5, "nothing in flight")


def test_schema_size_counts_type_list_copies_and_lets_real_schemas_through() -> None:
    """A tool schema as pydantic writes it passes; 8 types deep 5 levels (8**5 copies of
    the rest, ~500 bytes) and an enum of 5,001 values are refused, in every place an API
    puts a schema, and several schemas count together."""
    from llamad.gateway.access.refusal import Refusal
    from llamad.gateway.access.schemas import check

    def placed(schema: dict[str, Any]) -> list[dict[str, Any]]:
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        return [
            {"tools": [tool]},
            {"tools": [{"type": "function", "name": "f", "parameters": schema}]},
            {"tools": [{"name": "f", "input_schema": schema}]},
            {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}},
            {"response_format": {"type": "json_object", "schema": schema}},
            {"text": {"format": {"type": "json_schema", "schema": schema}}},
            {"json_schema": schema},
            {"format": schema},
        ]

    def check_doc(doc: dict[str, Any]) -> None:
        check(json.dumps(doc).encode())

    field = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "P"}
    person = {"type": "object", "properties": {f"p{i}": field for i in range(100)}}
    team = {"$defs": {"Person": person}, "type": "object", "title": "Team",
            "properties": {"people": {"type": "array", "items": {"$ref": "#/$defs/Person"}}},
            "required": ["people"]}  # fmt: skip
    for doc in placed(team) + placed({"type": ["string", "null"], "enum": list(range(2000))}):
        check_doc(doc)
    for hostile in (_nested_types(5), {"enum": list(range(5001))}):
        for doc in placed(hostile):
            with pytest.raises(Refusal):
                check_doc(doc)
    half = {"type": "string", "enum": list(range(2600))}
    check_doc({"tools": [{"name": "f", "input_schema": half}]})
    with pytest.raises(Refusal):
        check_doc({"tools": [{"name": f, "input_schema": half} for f in "fg"]})


def test_a_whole_answer_past_what_the_gateway_holds_is_a_400(gw: Gw) -> None:
    """`logprobs` runs to the whole vocabulary a token (16 KB with the tiny model's
    260): sixteen choices of 200 tokens are ~60 MB the gateway would hold to build the
    answer. Past 32 MiB it answers a 400 and cancels the choices still running (a
    stream holds none of it: asked so, it would be served)."""
    port = gw.ld.instance("tiny")["port"]
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 200, "logprobs": 100_000, "n": 16}
    got = _post(gw, "/v1/completions", body)
    assert got.status_code == 400
    assert "MiB the gateway holds" in got.json()["error"]["message"]

    def processing() -> int:
        slots = httpx.get(f"http://127.0.0.1:{port}/slots", timeout=5).json()
        return sum(bool(s["is_processing"]) for s in slots)

    wait_for(lambda: processing() == 0, 10, "llama-server to stop every choice")
    small = _post(gw, "/v1/completions", {**body, "max_tokens": 5, "n": 2})
    assert len(small.json()["choices"]) == 2


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": [5]},
        {"enum": 2},
        {"anyOf": 10**20},
        {"type": {"a": 1}},
        {"type": []},
        {"oneOf": []},
    ],
)
def test_a_schema_that_is_none_is_left_to_llama_server(schema: dict[str, Any]) -> None:
    """What is not a JSON schema makes no compact grammar, and raises nothing (it was a
    500): llama-server gets it as a schema, and says what is wrong with it."""
    from llamad.gateway.shaping.grammar import compact

    assert compact(schema) is None


def test_a_hostile_schema_is_refused_on_every_route_not_only_a_forced_call(gw: Gw) -> None:
    """The schema's size is the door's: a plain chat's response format, llama-server's
    own `json_schema` through /upstream (relayed as it came) and Ollama's `format` get
    the same 400 before llama-server builds anything; a modest schema is served."""
    hostile = _nested_types(6)
    wanted = {"type": "json_schema", "json_schema": {"name": "x", "schema": hostile}}
    for path, body in (
        (CHAT, _chat(response_format=wanted)),
        ("/upstream/tiny/completion", {"prompt": "hi", "n_predict": 2, "json_schema": hostile}),
        (OLLAMA, {"model": "tiny", "messages": HI, "format": hostile, "stream": False}),
        (MESSAGES, {"model": "tiny", "max_tokens": 3, "messages": HI,
                    "tools": [{"name": "f", "input_schema": hostile}]}),
    ):  # fmt: skip
        got = _post(gw, path, body)
        assert got.status_code == 400, (path, got.text[:200])
        assert "too large" in got.text, path
    modest = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fine = {"type": "json_schema", "json_schema": {"name": "x", "schema": modest}}
    assert _post(gw, CHAT, _chat(response_format=fine)).status_code == 200


def test_a_field_of_the_wrong_type_is_a_400_from_llama_server_too(gw: Gw) -> None:
    """A plain chat the gateway relays as it came, with a `name` or a tool llama-server
    cannot read: its 500 ("Failed to parse ...") reaches the client as a 400."""
    for body in (
        {**_chat(), "messages": [{"role": "user", "content": "hi", "name": 5}]},
        _chat(tools=[5]),
    ):
        got = _post(gw, CHAT, body)
        assert got.status_code == 400, got.text[:200]
        assert "Failed to parse" in got.json()["error"]["message"]
