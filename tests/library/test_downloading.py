"""A model still being pulled answers 503 `downloading` with the progress so far and
Retry-After, on OpenAI's routes and Ollama's alike, under any name it will answer to;
once the pull ends it answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from hub_stand_in import Hub

pytestmark = pytest.mark.timeout(120)

MESSAGES = [{"role": "user", "content": "hi"}]


@contextmanager
def held_pull(base: str, hub: Hub, repo: str, file: str, body: dict[str, str]) -> Iterator[Any]:
    """A pull through /api/pull, held once `file` is under way; yields its lines to come."""
    hub.hold_after[file] = 11 * 1024 * 1024
    total = len(hub.repos[repo][file])
    with httpx.stream("POST", f"{base}/api/pull", json=body, timeout=60) as pulling:
        lines = pulling.iter_lines()
        for line in lines:  # until the model's file is under way
            if json.loads(line).get("total") == total:
                break
        yield lines


def test_a_model_being_pulled_answers_503_downloading_on_both_families(
    daemon: Any, hub: Hub
) -> None:
    _ld, base, _cache = daemon
    total = len(hub.repos["someone/Tiny-GGUF"]["tiny-Q8_0.gguf"])
    body = {"model": "hf.co/someone/Tiny-GGUF:Q8_0"}
    with held_pull(base, hub, "someone/Tiny-GGUF", "tiny-Q8_0.gguf", body) as lines:
        openai = httpx.post(
            f"{base}/v1/chat/completions",
            json={"model": "someone/Tiny-GGUF:Q8_0", "messages": MESSAGES},
            timeout=10,
        )
        assert openai.status_code == 503, openai.text
        assert openai.headers["retry-after"] == "5"
        error = openai.json()["error"]
        assert error["code"] == "downloading"
        assert "is downloading (" in error["message"]
        assert f"of {total} bytes" in error["message"]
        ollama = httpx.post(
            f"{base}/api/chat",
            json={"model": "hf.co/someone/tiny-gguf:q8_0", "messages": MESSAGES, "stream": False},
            timeout=10,
        )
        assert ollama.status_code == 503, ollama.text
        assert ollama.headers["retry-after"] == "5"
        assert f"of {total} bytes" in ollama.json()["error"]
        other = httpx.post(
            f"{base}/v1/chat/completions", json={"model": "nothere", "messages": MESSAGES}
        )
        assert other.status_code == 404  # no pull of it: unknown, as before
        hub.released.set()
        rest = [json.loads(line) for line in lines if line.strip()]
    assert rest[-1] == {"status": "success"}
    done = httpx.post(
        f"{base}/v1/chat/completions",
        json={"model": "someone/Tiny-GGUF:Q8_0", "messages": MESSAGES, "max_tokens": 2},
        timeout=60,
    )
    assert done.status_code == 200, done.text


def test_a_bare_repo_pull_answers_downloading_under_every_name_of_its_quant(
    daemon: Any, hub: Hub
) -> None:
    ld, base, _cache = daemon
    total = len(hub.repos["someone/Big-GGUF"]["big-Q4_K_M.gguf"])
    # Ollama pulls Q4_K_M when no quant is named: every spelling of that model waits.
    names = ["someone/Big-GGUF:Q4_K_M", "hf.co/someone/Big-GGUF:Q4_K_M"]
    names += ["hf.co/someone/big-gguf:q4_k_m", "someone/Big-GGUF:Q4_k_M", "someone/Big-GGUF"]
    names += ["hf.co/someone/Big-GGUF:latest"]
    body = {"name": "hf.co/someone/Big-GGUF"}
    with held_pull(base, hub, "someone/Big-GGUF", "big-Q4_K_M.gguf", body) as lines:
        for name in names:
            body = {"model": name, "messages": MESSAGES}
            refused = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=10)
            assert refused.status_code == 503, (name, refused.text)
            assert refused.json()["error"]["code"] == "downloading"
            assert refused.headers["retry-after"] == "5"
            assert f"of {total} bytes" in refused.json()["error"]["message"]
        other = {"model": "someone/Big-GGUF:Q8_0", "messages": MESSAGES}
        assert httpx.post(f"{base}/v1/chat/completions", json=other).status_code == 404
        # A second pull under another spelling follows the first, not a download of its own.
        again = {"model": "someone/big-gguf:q4_K_M"}
        with httpx.stream("POST", f"{base}/api/pull", json=again, timeout=60) as second:
            hub.released.set()
            rest = [json.loads(line) for line in lines if line.strip()]
            followed = [json.loads(line) for line in second.iter_lines() if line.strip()]
    assert rest[-1] == followed[-1] == {"status": "success"}
    assert followed[0] == {"status": "pulling manifest"}  # replayed from the first
    assert len(ld.events("library.pull_started")) == 1
    for name in names:  # and each answers once the pull has ended, in any case
        reply = httpx.post(
            f"{base}/v1/chat/completions",
            json={"model": name, "messages": MESSAGES, "max_tokens": 2},
            timeout=60,
        )
        assert reply.status_code == 200, (name, reply.text)
