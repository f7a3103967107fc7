"""No key or prompt in the daemon's log, and no guessing the gateway's key (issue #30),
against a real llamad and llama-server: nested, malformed and invalid requests are 400s
in each family's shape, and wrong keys are limited per address."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from flood import client, connect, read_answer
from gateway_helpers import TINY, Gw, gateway
from remote_helpers import write_token

KEY = "gw-key-" + "7f3a9c" * 5
PROMPT = "the-client-prompt-4d1e"
OPENAI, OLLAMA = "/v1/chat/completions", "/api/chat"


@pytest.fixture
def gw(tiny_model: Path, tmp_path: Path) -> Iterator[Gw]:
    key_file = write_token(tmp_path / "gw.key", KEY)
    with gateway(tiny_model, {"a": TINY}, api_key_file=str(key_file)) as g:
        yield g


def body(model: str, tail: str = "") -> bytes:
    """A chat body naming `model` and carrying the prompt, with `tail` spliced in."""
    messages = json.dumps([{"role": "user", "content": PROMPT}])
    return f'{{"model": {model}, "messages": {messages}, "stream": false{tail}}}'.encode()


def error_of(path: str, answer: httpx.Response) -> str:
    doc = answer.json()
    return str(doc["error"] if path == OLLAMA else doc["error"]["message"])


def test_bad_requests_are_400s_and_the_log_holds_no_key_or_prompt(gw: Gw) -> None:
    deep = ', "x": ' + "[" * 200_000 + "]" * 200_000
    cases = {
        "nested too deeply": body('"a"', deep),
        "lone surrogate": body('"\\ud800"'),
        "not JSON": body('"a"', ", ,"),
    }
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as c:
        for path in (OPENAI, OLLAMA):
            for what, raw in cases.items():
                answer = c.post(gw.base + path, content=raw)
                assert answer.status_code == 400, (path, what, answer.text[:200])
                assert PROMPT not in answer.text
                error_of(path, answer)  # in the family's shape
        fine = c.post(gw.base + OPENAI, content=body('"a"', ', "max_tokens": 2'))
        assert fine.status_code == 200
    wrong = httpx.post(gw.base + OPENAI, content=body('"a"'), headers={"x-api-key": KEY[:-1]})
    assert wrong.status_code == 401
    assert gw.ld.stop() == 0
    log = gw.ld.stderr_path.read_text()
    assert "Traceback" not in log
    assert KEY[:-1] not in log
    assert PROMPT not in log


def test_wrong_keys_are_limited_per_address(gw: Gw) -> None:
    """50 fast guesses: 10 are answered 401, the rest 429 with Retry-After, in each
    family's shape; the right key still works, from that address as from another (a
    stranger guessing beside a client never locks it out)."""
    statuses = []
    with client("127.0.0.2") as guesser:
        for n in range(50):
            path = OLLAMA if n % 2 else OPENAI
            answer = guesser.post(
                gw.base + path, content=body('"a"'), headers={"x-api-key": f"{n:016d}"}
            )
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                assert int(answer.headers["retry-after"]) >= 1
                assert "too many" in error_of(path, answer)
        right = guesser.post(
            gw.base + OPENAI, content=body('"a"', ', "max_tokens": 2'), headers={"x-api-key": KEY}
        )
        assert right.status_code == 200  # only the guesses wait
    assert statuses == [401] * 10 + [429] * 40
    with client("127.0.0.3") as other:
        ok = other.post(
            gw.base + OPENAI, content=body('"a"', ', "max_tokens": 2'), headers={"x-api-key": KEY}
        )
        assert ok.status_code == 200
        # No key at all is no guess: it is not counted.
        for _ in range(12):
            assert other.get(gw.base + "/v1/models").status_code == 401
        assert other.get(gw.base + "/v1/models", headers={"x-api-key": KEY}).status_code == 200
    (blocked,) = gw.ld.events("gateway.client_blocked")
    assert blocked["client"] == "127.0.0.2"
    log = gw.ld.stderr_path.read_text()
    assert f"{7:016d}" not in log
    assert KEY not in log


def test_a_refusal_before_the_body_keeps_the_connection(gw: Gw) -> None:
    """A wrong key answered 401 before its body arrived (what a loaded daemon does) leaves
    the kept-alive connection open: the body is dropped and the next request is served."""
    raw = body('"a"')
    host = gw.base.removeprefix("http://")

    def head(method: str, path: str, *lines: str) -> bytes:
        text = "".join(
            f"{line}\r\n" for line in (f"{method} {path} HTTP/1.1", f"Host: {host}", *lines)
        )
        return f"{text}\r\n".encode()

    with connect(int(host.rsplit(":", 1)[1]), "127.0.0.4") as sock:
        sock.sendall(head("POST", OPENAI, "x-api-key: " + "9" * 16, f"Content-Length: {len(raw)}"))
        status, _ = read_answer(sock)
        assert status == 401
        sock.sendall(raw)
        sock.sendall(head("GET", "/v1/models", f"x-api-key: {KEY}"))
        status, doc = read_answer(sock)
        assert status == 200, "the connection was closed under the client"
        assert doc["data"]
