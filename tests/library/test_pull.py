"""Pulls with the real huggingface_hub against a local hub stand-in (HF_ENDPOINT), and
from an Ollama registry stand-in: progress, resume after a cut, a digest mismatch refused
with nothing left behind, clear errors, and the model routable when the pull ends."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from hub_stand_in import Hub

pytestmark = pytest.mark.timeout(120)


def _chat(base: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    return httpx.post(f"{base}/api/chat", json={**body, "options": {"num_predict": 2}}, timeout=60)


def _lines(resp: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in resp.text.splitlines() if line.strip()]


def test_llamactl_pull_shows_progress_then_the_model_answers(daemon: Any, hub: Hub) -> None:
    ld, base, _cache = daemon
    assert hub.paths == []  # a daemon's start touches no network
    done = ld.ctl("pull", "hf.co/someone/Tiny-GGUF:Q4_k_m")  # the quant as people type it
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "pulling manifest"
    assert any(line.startswith("pulling ") and "100% of" in line for line in out)
    assert out[-1] == "success"
    pulled = len(hub.paths)
    for name in ("hf.co/someone/Tiny-GGUF:Q4_K_M", "someone/tiny-gguf:q4_K_m"):
        reply = _chat(base, name)
        assert reply.status_code == 200, (name, reply.text)
    assert len(hub.paths) == pulled  # nor does a request
    listed = {m["name"]: m for m in ld.api("GET", "/v1/library")["models"]}
    assert listed["someone/Tiny-GGUF:Q4_K_M"]["source"] == "pulled:hf"
    models = ld.ctl("models")
    row = next(ln for ln in models.stdout.splitlines() if ln.startswith("someone/Tiny-GGUF:"))
    assert row.split()[1] == "pulled:hf"
    assert row.split()[-2:] == ["Q4_K_M", "yes"]  # its quantisation, and loaded by the chat


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
    nofile = ld.ctl("pull", "hf.co/someone/Tiny-GGUF/nothere.gguf")
    assert "no file nothere.gguf; it has: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf" in nofile.stderr


def test_a_pull_by_file_answers_by_its_quants_name(daemon: Any) -> None:
    ld, base, cache = daemon
    done = ld.ctl("pull", "hf.co/someone/Tiny-GGUF/tiny-Q8_0.gguf")
    assert done.returncode == 0, done.stderr
    snapshot = next((cache / "models--someone--Tiny-GGUF" / "snapshots").iterdir())
    assert [p.name for p in snapshot.iterdir()] == ["tiny-Q8_0.gguf"]  # that file only
    assert _chat(base, "hf.co/someone/Tiny-GGUF:Q8_0").status_code == 200


def test_ollama_registry_pull(daemon: Any, hub: Hub, tmp_path: Path) -> None:
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
    # Its layers count as a store's do: the system prompt is the model's default.
    shown = httpx.post(f"{base}/api/show", json={"model": "tinyllama:1b"}, timeout=10)
    assert shown.json()["system"] == "You are a tiny llama."
    named = b"the bytes the manifest names"
    hub.ollama["badllama:1b"] = [("application/vnd.ollama.image.model", named)]
    digest = "sha256:" + hashlib.sha256(named).hexdigest()
    hub.served_instead[digest] = b"other bytes than it names"
    refused = httpx.post(f"{base}/api/pull", json={"model": "badllama:1b", "stream": False})
    assert "sha256 mismatch" in refused.json()["error"]
    assert not (store / "manifests" / "registry.ollama.ai" / "library" / "badllama").exists()
    assert not [p for p in (store / "blobs").iterdir() if p.name.endswith("-partial")]
    assert _chat(base, "badllama:1b").status_code == 404
    missing = httpx.post(f"{base}/api/pull", json={"model": "nothere", "stream": False}, timeout=30)
    assert "no such model in Ollama's registry" in missing.json()["error"]
    assert os.path.exists(store)
