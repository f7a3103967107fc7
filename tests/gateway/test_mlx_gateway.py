"""An mlx instance behind the gateway, with the official openai client."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest
from helpers import Llamad, free_port, short_dir, wait_for, write_config

from llamad.backends.mlx.cache_limit import machine_default

pytest.importorskip("mlx_lm", reason="the mlx extra does not install on this platform")


@pytest.mark.timeout(180)
def test_openai_client_through_the_gateway_pins_the_model(tiny_mlx_model: Path) -> None:
    """Routed by name or alias; the client's `model` never reaches mlx_lm.server (it would
    try to load it); streaming ends with [DONE]; the estimate is the weights' size."""
    d, port = short_dir(), free_port()
    cfg = write_config(
        d / "llamad.toml",
        {"qm": {"kind": "mlx", "model": tiny_mlx_model, "port": free_port(), "aliases": ["q"]}},
        daemon={"state_dir": str(d / "state"), "llama_server": str(d / "none")},
        supervise={"health_interval": 0.5},
        gateway={"listen": f"127.0.0.1:{port}"},
    )
    with Llamad(cfg) as ld:
        ld.wait_running("qm", timeout=90)
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(f"{base}/health", timeout=1).status_code == 200, 10)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="q", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert reply.choices[0].finish_reason == "length"
        assert reply.model == "q"  # the name asked, not the server's pinned one
        stream = client.chat.completions.create(
            model="qm", messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True
        )
        chunks = list(stream)
        assert chunks[-1].choices[0].finish_reason == "length"
        assert {c.model for c in chunks} == {"qm"}
        shown = httpx.post(f"{base}/api/show", json={"model": "qm"}, timeout=10).json()
        assert "completion" in shown["capabilities"]
        assert str(tiny_mlx_model) not in json.dumps(shown)
        weights = sum(p.stat().st_size for p in tiny_mlx_model.glob("*.safetensors"))
        # The weights and the prompt caches' limit llamad passed (test_mlx_memory).
        assert ld.instance("qm")["gateway"]["estimate_bytes"] == weights + machine_default()
        # Sent straight to the server, the alias is a model it tries (and fails) to load.
        direct = f"http://127.0.0.1:{ld.instance('qm')['port']}/v1/chat/completions"
        body = {"model": "q", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        assert httpx.post(direct, json=body, timeout=30).status_code != 200
        assert ld.stop() == 0
