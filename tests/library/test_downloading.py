"""A model still being pulled answers 503 `downloading` with the progress so far and
Retry-After, on OpenAI's routes and Ollama's alike, under any name it will answer to;
once the pull ends it answers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hub_stand_in import Hub

pytestmark = pytest.mark.timeout(120)

MESSAGES = [{"role": "user", "content": "hi"}]


def test_a_model_being_pulled_answers_503_downloading_on_both_families(
    daemon: Any, hub: Hub
) -> None:
    _ld, base, _cache = daemon
    hub.hold_after["tiny-Q8_0.gguf"] = 11 * 1024 * 1024
    total = len(hub.repos["someone/Tiny-GGUF"]["tiny-Q8_0.gguf"])
    body = {"model": "hf.co/someone/Tiny-GGUF:Q8_0"}
    with httpx.stream("POST", f"{base}/api/pull", json=body, timeout=60) as pulling:
        lines = pulling.iter_lines()
        for line in lines:  # until the model's file is under way
            if json.loads(line).get("total") == total:
                break
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
