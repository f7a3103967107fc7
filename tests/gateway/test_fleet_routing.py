"""The fleet behind one endpoint: two real daemons on loopback, A routing to B's models."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fleet_helpers import Host, a_routing_to_b
from helpers import wait_for

from llamad.cli.fleet_status import gateway_line

# Two daemons and three llama-servers on a busy 2-core machine: more than the default.
pytestmark = pytest.mark.timeout(150)


@pytest.fixture
def fleet(tiny_model: Path) -> Iterator[tuple[Host, Host]]:
    """B serves `bonly` and `both` behind its gateway (with a key) and control on TCP;
    A serves `both` itself and routes the rest to B, a `[fleet]` peer."""
    with a_routing_to_b(tiny_model, embeddings=True) as hosts:
        yield hosts


def _client(host: Host) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{host.gateway}/v1", api_key="unused", max_retries=0)


def test_a_model_only_on_b_is_served_through_a(fleet: tuple[Host, Host]) -> None:
    """The openai client on A's URL reaches B's model, streaming and not; A lists it with
    its host; B's key goes upstream, A's client needs none."""
    a, b = fleet
    client = _client(a)
    wait_for(lambda: "bonly" in a.models(), 15, "A learning B's models")
    entry = a.models()["bonly"]
    assert entry["owned_by"] == "llamad@b"
    tags = httpx.get(f"{a.gateway}/api/tags", timeout=10).json()["models"]
    assert {t["name"]: t.get("host") for t in tags}["bonly:latest"] == "b"
    reply = client.chat.completions.create(
        model="bonly", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert reply.choices[0].message.content is not None
    assert reply.model == "bonly"  # B's gateway answers by the name asked, never a path
    chunks = list(
        client.chat.completions.create(
            model="bonly", messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True
        )
    )
    assert chunks
    assert {c.model for c in chunks} == {"bonly"}
    assert chunks[-1].choices[0].finish_reason is not None
    # A's activity says which peer served them.
    served = httpx.get(f"{a.gateway}/v1/activity?model=bonly", timeout=5).json()["data"]
    assert [(r["peer"], r["host"], r["status"]) for r in served] == [(True, "b", 200)] * 2
    by_alias(a)
    # Without B's key, B's own gateway refuses: A added it.
    direct = httpx.post(f"{b.gateway}/v1/chat/completions", json={"model": "bonly"}, timeout=5)
    assert direct.status_code == 401


def by_alias(a: Host) -> None:
    """Asked by the alias of B's model, each kind of answer through A names that alias,
    whole and streamed (embeddings: whole)."""
    assert a.models()["b-mini"]["llamad"]["alias_of"] == "bonly"
    hi = [{"role": "user", "content": "hi"}]
    for path, body in [
        ("/v1/chat/completions", {"messages": hi, "max_tokens": 2}),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
        ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
        ("/v1/messages", {"messages": hi, "max_tokens": 2}),
    ]:
        whole = httpx.post(a.gateway + path, json={"model": "b-mini", **body}, timeout=30)
        assert whole.json()["model"] == "b-mini", (path, whole.text)
        streamed = {"model": "b-mini", "stream": True, **body}
        with httpx.stream("POST", a.gateway + path, json=streamed, timeout=30) as events:
            # Wherever an event names the model (messages and responses: in an object).
            named = set(re.findall(r'"model": ?"([^"]*)"', events.read().decode()))
        assert named == {"b-mini"}, (path, named)
    embedded = httpx.post(
        f"{a.gateway}/v1/embeddings", json={"model": "b-embed", "input": "hi"}, timeout=30
    )
    assert embedded.json()["model"] == "b-embed", embedded.text
    chat = {"model": "b-mini", "messages": hi, "stream": False, "options": {"num_predict": 2}}
    ollama = httpx.post(f"{a.gateway}/api/chat", json=chat, timeout=30)
    assert ollama.json()["model"] == "b-mini"


def test_a_model_on_both_is_served_locally(fleet: tuple[Host, Host]) -> None:
    """Local first: with B's copy stopped by a person, A still answers for `both`."""
    a, b = fleet
    wait_for(lambda: "bonly" in a.models(), 15, "A learning B's models")
    assert a.models()["both"]["owned_by"] == "llamad"
    assert b.ld.ctl("stop", "both").returncode == 0
    reply = _client(a).chat.completions.create(
        model="both", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert reply.choices[0].message.content is not None


def test_b_stopped_answers_503_naming_b(fleet: tuple[Host, Host]) -> None:
    """B goes away: a request for its model gets 503 naming B (not a 404, not a hang),
    and so does the next one."""
    a, b = fleet
    wait_for(lambda: "bonly" in a.models(), 15, "A learning B's models")
    assert b.ld.stop() == 0
    body = {"model": "bonly", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    for _ in range(2):
        answer = httpx.post(f"{a.gateway}/v1/chat/completions", json=body, timeout=10)
        assert answer.status_code == 503, answer.text
        message = answer.json()["error"]["message"]
        assert "'bonly'" in message
        assert " b" in message


def test_a_peer_dying_mid_stream_ends_the_stream_with_an_error_event(
    fleet: tuple[Host, Host],
) -> None:
    """B is killed while A relays its stream: the client gets an error event, not a
    stream that merely stops."""
    a, b = fleet
    wait_for(lambda: "bonly" in a.models(), 15, "A learning B's models")
    body = {
        "model": "bonly",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 100000,
        "stream": True,
    }
    with httpx.stream("POST", f"{a.gateway}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        b.ld.proc.kill()  # the daemon dies; its children follow (PDEATHSIG)
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest, "the stream ended without a word"
    assert '"error"' in rest[-1]
    assert "broke off" in rest[-1]


def test_fleet_status_line_names_the_gateway_and_loaded_models() -> None:
    status = {
        "gateway": {"listen": "127.0.0.1:8080"},
        "instances": [
            {"name": "a", "state": "running", "gateway": {"routable": True}},
            {"name": "b", "state": "idle", "gateway": {"routable": True}},
            {"name": "w", "state": "running"},
        ],
    }
    assert gateway_line(status) == "gateway 127.0.0.1:8080, loaded: a"
    assert gateway_line({"instances": []}) is None
