"""Routing, streaming and auth through the gateway, with the official openai client."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from gateway_helpers import TINY, chat, gateway


def test_openai_client_streaming_and_not(tiny_model: Path) -> None:
    inst = {"tiny": {**TINY, "aliases": ["gpt-4o-mini"]}}
    with gateway(tiny_model, inst) as gw:
        client = openai.OpenAI(base_url=f"{gw.base}/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        assert reply.choices[0].finish_reason == "length"
        assert reply.model == "gpt-4o-mini"  # the name asked for, not the instance's
        stream = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=8, stream=True
        )
        chunks = list(stream)
        assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason == "length"
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 1
        listed = client.models.list()
        assert [m.id for m in listed.data] == ["tiny", "gpt-4o-mini"]
        with pytest.raises(openai.NotFoundError) as info:
            client.chat.completions.create(model="nope", messages=[], max_tokens=1)
        assert "tiny, gpt-4o-mini" in str(info.value)


def test_sse_passes_unbuffered_with_headers(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY}) as gw:
        with httpx.stream(
            "POST", f"{gw.base}/v1/chat/completions", json=chat("tiny", 8, stream=True)
        ) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            assert resp.headers["x-accel-buffering"] == "no"
            text = "".join(resp.iter_text())
        assert text.rstrip().endswith("data: [DONE]")


def test_models_health_props_and_upstream(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY, "lazy": {**TINY, "on_demand": True}}) as gw:
        models = gw.models()
        assert models["tiny"]["owned_by"] == "llamad"
        assert models["tiny"]["llamad"]["loaded"] is True
        assert models["lazy"]["llamad"]["state"] == "stopped"
        assert models["lazy"]["llamad"]["on_demand"] is True
        assert gw.state("lazy") == "stopped"  # listing never loads
        assert httpx.get(f"{gw.base}/health").json() == {"status": "ok"}
        props = httpx.get(f"{gw.base}/props", params={"model": "tiny"})
        assert props.status_code == 200
        assert "default_generation_settings" in props.json()
        assert str(gw.model) not in props.text  # model_path: the name asked for
        assert httpx.get(f"{gw.base}/props").status_code == 400
        tokens = httpx.post(f"{gw.base}/tokenize", json={"model": "tiny", "content": "ab"})
        assert tokens.status_code == 200
        assert tokens.json()["tokens"]
        slots = httpx.get(f"{gw.base}/upstream/tiny/slots")
        assert slots.status_code == 200
        assert isinstance(slots.json(), list)
        missing = httpx.post(f"{gw.base}/v1/completions", json={"model": "x", "prompt": "a"})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "model_not_found"


def test_gateway_key_and_instance_key(tiny_model: Path, tmp_path: Path) -> None:
    key_file = tmp_path / "gateway.key"
    key_file.write_text("gateway-secret-0123456789\n")
    key_file.chmod(0o600)
    inst = {"tiny": {**TINY, "api_key": "instance-secret-0123456789"}}
    with gateway(tiny_model, inst, api_key_file=str(key_file)) as gw:
        url = f"{gw.base}/v1/chat/completions"
        wrong = httpx.post(url, json=chat("tiny"), headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "invalid_api_key"
        assert httpx.post(url, json=chat("tiny")).status_code == 401
        bearer = {"Authorization": "Bearer gateway-secret-0123456789"}
        # The gateway adds the instance's own key upstream, never forwarding the client's.
        assert httpx.post(url, json=chat("tiny"), headers=bearer).status_code == 200
        x_key = {"x-api-key": "gateway-secret-0123456789"}
        assert httpx.post(url, json=chat("tiny"), headers=x_key).status_code == 200
        assert httpx.get(f"{gw.base}/health").status_code == 200
