"""Ollama's client through the daemon's real gateway, with real llama-servers."""

from __future__ import annotations

from pathlib import Path

import httpx
import ollama
from gateway_helpers import TINY, gateway
from helpers import wait_for


def test_ollama_client_through_the_daemons_gateway(tiny_model: Path) -> None:
    instances = {"always": {**TINY, "aliases": ["al"]}, "lazy": {**TINY, "on_demand": True}}
    with gateway(tiny_model, instances) as gw, ollama.Client(host=gw.base, timeout=30) as client:
        assert httpx.get(gw.base + "/api/version").json()["version"]
        listed = sorted(m.model for m in client.list().models)
        assert listed == ["al:latest", "always:latest", "lazy:latest"]
        info = client.show("al:latest").modelinfo or {}
        assert info["general.architecture"] == "llama"
        messages = [{"role": "user", "content": "hi"}]
        reply = client.chat("lazy", messages=messages, keep_alive=0, options={"num_predict": 3})
        assert reply.done
        assert reply.eval_count == 3
        wait_for(lambda: gw.state("lazy") == "idle", 15, "lazy unloaded by keep_alive 0")
        assert [m.model for m in client.ps().models] == ["always:latest"]
        chunks = list(client.generate("al", prompt="x", stream=True, options={"num_predict": 2}))
        assert chunks[-1].done
        missing = httpx.post(gw.base + "/api/chat", json={"model": "nope", "messages": messages})
        assert missing.status_code == 404
        assert set(missing.json()) == {"error"}
