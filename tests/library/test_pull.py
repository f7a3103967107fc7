"""Pulls with the real huggingface_hub against a local hub stand-in (HF_ENDPOINT), and
from an Ollama registry stand-in: progress, resume after a cut, a digest mismatch refused
with nothing left behind, clear errors, and the model routable when the pull ends."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from helpers import Llamad, free_port, short_dir
from hub_stand_in import Hub, serving

from llamad.daemon.tinymodel import Shape, write_tiny_model

pytestmark = pytest.mark.timeout(120)

GGUF = "application/vnd.ollama.image.model"


@pytest.fixture(scope="module")
def bigger_model(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A model past huggingface_hub's 10 MiB read chunk: a cut after the first chunk
    leaves bytes on disk to resume from."""
    shape = Shape(n_embd=256, n_head=4, n_layer=4, n_ff=1024)
    return write_tiny_model(tmp_path_factory.mktemp("big") / "big.gguf", shape=shape).read_bytes()


@pytest.fixture
def hub(tiny_model: Path, bigger_model: bytes) -> Iterator[Hub]:
    data = tiny_model.read_bytes()
    hub = Hub()
    hub.repos["someone/Tiny-GGUF"] = {"tiny-Q4_K_M.gguf": data, "tiny-Q8_0.gguf": bigger_model}
    hub.repos["someone/Corrupt-GGUF"] = {"c-Q4_K_M.gguf": data}
    hub.claimed_sha["c-Q4_K_M.gguf"] = "0" * 64
    hub.repos["someone/Huge-GGUF"] = {"h-Q4_K_M.gguf": data}
    hub.claimed_size["h-Q4_K_M.gguf"] = 10**16
    hub.ollama["tinyllama:1b"] = [
        (GGUF, data),
        ("application/vnd.ollama.image.params", b'{"num_ctx": 512}'),
    ]
    with serving(hub):
        yield hub


@pytest.fixture
def daemon(tmp_path: Path, hub: Hub) -> Iterator[tuple[Llamad, str, Path]]:
    d = short_dir()
    port = free_port()
    cfg = d / "llamad.toml"
    models = tmp_path / "home" / "models"
    cfg.write_text(
        f'[daemon]\nstate_dir = "{d}/state"\n[supervise]\nhealth_interval = 0.5\n'
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n'
        f'[library]\ndirs = ["{models}", "{tmp_path}/hub"]\npull_dir = "{models}"\n'
        f'ollama_registry = "{hub.url}"\n[library.defaults]\nctx_size = 256\n'
    )
    env = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_XET": "1"}
    with Llamad(cfg, env) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        yield ld, f"http://127.0.0.1:{port}", tmp_path / "hub"
        assert ld.stop() == 0


def _chat(base: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    return httpx.post(f"{base}/api/chat", json={**body, "options": {"num_predict": 2}}, timeout=60)


def _lines(resp: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in resp.text.splitlines() if line.strip()]


def test_llamactl_pull_shows_progress_then_the_model_answers(daemon: Any, hub: Hub) -> None:
    ld, base, _cache = daemon
    done = ld.ctl("pull", "hf.co/someone/Tiny-GGUF:Q4_K_M")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "pulling manifest"
    assert any(line.startswith("pulling ") and "100% of" in line for line in out)
    assert out[-1] == "success"
    reply = _chat(base, "hf.co/someone/Tiny-GGUF:Q4_K_M")
    assert reply.status_code == 200, reply.text
    listed = {m["name"]: m for m in ld.api("GET", "/v1/library")["models"]}
    assert listed["someone/Tiny-GGUF:Q4_K_M"]["source"] == "pulled:hf"
    models = ld.ctl("models")
    assert "someone/Tiny-GGUF:Q4_K_M  pulled:hf" in models.stdout


def test_ollama_client_pull_through_the_gateway_resumes_a_cut(daemon: Any, hub: Hub) -> None:
    _ld, base, _cache = daemon
    hub.cut_after["tiny-Q8_0.gguf"] = 11 * 1024 * 1024
    with ollama.Client(host=base, timeout=60) as client:
        events = list(client.pull("hf.co/someone/Tiny-GGUF:Q8_0", stream=True))
    assert events[0].status == "pulling manifest"
    sized = [e for e in events if e.total]
    assert sized
    assert sized[-1].completed == sized[-1].total
    assert events[-1].status == "success"
    assert any(r.startswith("bytes=") for r in hub.ranges)  # resumed, not started over
    assert _chat(base, "someone/Tiny-GGUF:Q8_0").status_code == 200


def test_a_digest_mismatch_is_refused_and_nothing_is_left(daemon: Any, hub: Hub) -> None:
    _ld, base, cache = daemon
    resp = httpx.post(f"{base}/api/pull", json={"model": "someone/Corrupt-GGUF:Q4_K_M"}, timeout=60)
    last = _lines(resp)[-1]
    assert "sha256 mismatch" in last["error"]
    left = [
        p
        for p in (cache / "models--someone--Corrupt-GGUF").rglob("*")
        if p.is_file() or p.is_symlink()
    ]
    assert [p for p in left if p.suffix == ".gguf" or p.parent.name == "blobs"] == []
    assert _chat(base, "someone/Corrupt-GGUF:Q4_K_M").status_code == 404


def test_clear_errors_name_what_exists(daemon: Any) -> None:
    ld, base, _ = daemon
    quant = ld.ctl("pull", "someone/Tiny-GGUF:Q2_K")
    assert quant.returncode == 1
    assert "no GGUF with quantisation Q2_K; it has: Q4_K_M, Q8_0" in quant.stderr
    repo = ld.ctl("pull", "hf.co/nobody/Missing-GGUF:Q4_K_M")
    assert "nobody/Missing-GGUF: no such repository" in repo.stderr
    full = httpx.post(
        f"{base}/api/pull", json={"model": "someone/Huge-GGUF:Q4_K_M", "stream": False}, timeout=60
    )
    assert full.status_code == 500
    assert "not enough disk space" in full.json()["error"]
    bad = httpx.post(f"{base}/api/pull", json={"model": "no//good"}, timeout=10)
    assert bad.status_code == 400


def test_ollama_registry_pull(daemon: Any, tmp_path: Path) -> None:
    _ld, base, _ = daemon
    resp = httpx.post(f"{base}/api/pull", json={"model": "tinyllama:1b"}, timeout=60)
    lines = _lines(resp)
    assert lines[0] == {"status": "pulling manifest"}
    assert {"status": "writing manifest"} in lines
    assert lines[-1] == {"status": "success"}
    assert any(line.get("digest", "").startswith("sha256:") for line in lines)
    store = tmp_path / "home" / "models" / ".ollama"
    assert (store / "manifests" / "registry.ollama.ai" / "library" / "tinyllama" / "1b").is_file()
    assert not [p for p in (store / "blobs").iterdir() if p.name.endswith("-partial")]
    assert _chat(base, "tinyllama:1b").status_code == 200
    missing = httpx.post(f"{base}/api/pull", json={"model": "nothere", "stream": False}, timeout=30)
    assert "no such model in Ollama's registry" in missing.json()["error"]
    assert os.path.exists(store)
