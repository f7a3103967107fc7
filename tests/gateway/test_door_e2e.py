"""The red team's access findings against a real llamad and llama-server: a key limited
to model `a` cannot unload `b` (F2) nor learn that it exists (F6), a body that is not
UTF-8 JSON is a 400 (F9), two Host headers are refused, and the Bearer scheme is read
in any case."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from flood import client, connect, read_answer
from gateway_helpers import TINY, Gw, chat, gateway
from remote_helpers import write_token

pytestmark = pytest.mark.timeout(90)

MAIN, ALICE = "main-secret-0123456789", "alice-secret-0123456789"


@pytest.fixture
def gw(tiny_model: Path, tmp_path: Path) -> Iterator[Gw]:
    keys = {"alice": {"key_file": str(write_token(tmp_path / "alice.key", ALICE)), "models": ["a"]}}
    main = write_token(tmp_path / "main.key", MAIN)
    instances = {"a": TINY, "b": {**TINY, "on_demand": True}}
    with gateway(tiny_model, instances, api_key_file=str(main), keys=keys) as g:
        yield g


def post(gw: Gw, path: str, body: object, key: str) -> httpx.Response:
    return httpx.post(gw.base + path, json=body, headers={"x-api-key": key}, timeout=60)


def test_a_limited_key_cannot_unload_another_model(gw: Gw) -> None:
    loaded = post(gw, "/v1/chat/completions", chat("b", 2), MAIN)
    assert loaded.status_code == 200
    assert gw.state("b") == "running"
    # F2: keep_alive 0 with nothing to say, and an empty chat, unload on Ollama's API.
    for path, body in (
        ("/api/generate", {"model": "b", "keep_alive": 0}),
        ("/api/chat", {"model": "b", "messages": [], "keep_alive": 0}),
    ):
        refused = post(gw, path, body, ALICE)
        assert (refused.status_code, refused.json()) == (404, {"error": 'model "b" not found'})
    assert gw.state("b") == "running"
    # Her own model she may unload: `a` is always on, so it stays (as before).
    assert post(gw, "/api/generate", {"model": "a", "keep_alive": 0}, ALICE).status_code == 200


def test_a_limited_key_cannot_see_another_model(gw: Gw) -> None:
    """F6: `b` answers as a model that does not exist, and no list names it."""
    assert post(gw, "/v1/chat/completions", chat("b", 2), MAIN).status_code == 200
    for name in ("b", "nope"):
        show = post(gw, "/api/show", {"model": name}, ALICE)
        assert (show.status_code, show.json()) == (404, {"error": f'model "{name}" not found'})
        one = httpx.get(f"{gw.base}/v1/models/{name}", headers={"x-api-key": ALICE}, timeout=5)
        assert one.status_code == 404
        assert one.json()["error"]["message"] == f"model {name!r} does not exist; available: a"
        relayed = post(gw, "/v1/chat/completions", chat(name, 2), ALICE)
        assert relayed.status_code == 404
        assert relayed.json()["error"]["message"].endswith("available: a")
    ps = httpx.get(f"{gw.base}/api/ps", headers={"x-api-key": ALICE}, timeout=5).json()
    assert [m["name"] for m in ps["models"]] == ["a:latest"]


def test_a_body_that_is_not_utf8_json_is_a_400(gw: Gw) -> None:
    """F9: UTF-16 with a BOM, which Python's json.loads takes and llama-server does not."""
    for path, doc in (
        ("/v1/chat/completions", chat("a", 2)),
        ("/api/chat", {"model": "a", "messages": [{"role": "user", "content": "hi"}]}),
    ):
        raw = httpx.Request("POST", "http://x", json=doc).content.decode().encode("utf-16")
        answer = httpx.post(gw.base + path, content=raw, headers={"x-api-key": MAIN}, timeout=30)
        assert answer.status_code == 400, (path, answer.text)
        error = answer.json()["error"]
        assert "not UTF-8 JSON" in (error if isinstance(error, str) else error["message"])


def test_two_host_headers_are_refused(gw: Gw) -> None:
    """The first names a stranger, the second us: one listener must not read the one and
    a proxy in front the other."""
    port = int(gw.base.rsplit(":", 1)[1])
    for first in ("evil.test", f"127.0.0.1:{port}"):
        head = (
            f"GET /v1/models HTTP/1.1\r\nHost: {first}\r\nHost: 127.0.0.1:{port}\r\n"
            f"x-api-key: {MAIN}\r\nConnection: close\r\n\r\n"
        )
        with connect(port, "127.0.0.1") as sock:
            sock.sendall(head.encode())
            status, _ = read_answer(sock)
        assert status == 400, first  # RFC 9112 3.2, by the listener before the door


def test_the_bearer_scheme_is_read_in_any_case(gw: Gw) -> None:
    with client("127.0.0.1") as c:
        for scheme in ("bearer", "BEARER", "Bearer"):
            auth = {"Authorization": f"{scheme} {MAIN}"}
            assert c.get(gw.base + "/v1/models", headers=auth).status_code == 200, scheme
