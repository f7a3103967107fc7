"""`llamactl rm` and Ollama's `DELETE /api/delete` on a running daemon: a loaded model is
unloaded, then its files go, then the library forgets it; a person's own file is refused
with where it lives; an unknown name is Ollama's 404."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_for

pytestmark = pytest.mark.timeout(120)

HF = "someone/Tiny-GGUF:Q4_K_M"


def _chat(base: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    return httpx.post(f"{base}/api/chat", json={**body, "options": {"num_predict": 2}}, timeout=60)


def _names(ld: Any) -> set[str]:
    return {m["name"] for m in ld.api("GET", "/v1/library")["models"]}


def test_rm_unloads_a_loaded_pull_then_deletes_it(daemon: Any) -> None:
    ld, base, cache = daemon
    assert ld.ctl("pull", f"hf.co/{HF}").returncode == 0
    assert _chat(base, HF).status_code == 200  # loaded now
    done = ld.ctl("rm", f"hf.co/{HF}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"deleted {HF} (")
    names = [e.get("event") for e in ld.events()]
    stopped = names.index("instance.idle_stopped")  # the gateway's unload
    assert stopped < names.index("library.removed")
    assert ld.events("instance.idle_stopped")[0]["reason"] == "unload"
    repo = cache / "models--someone--Tiny-GGUF"
    assert not [p for p in repo.rglob("*.gguf")]
    assert not [p for p in (repo / "blobs").iterdir() if p.is_file()]
    assert HF not in _names(ld)  # reloaded before the answer
    assert _chat(base, HF).status_code == 404
    again = ld.ctl("rm", HF)
    assert again.returncode == 1
    assert f"no model named {HF!r} in the library" in again.stderr


def test_ollama_delete_and_a_persons_own_file(
    daemon: Any, tiny_model: Path, tmp_path: Path
) -> None:
    ld, base, _cache = daemon
    pulled = httpx.post(f"{base}/api/pull", json={"model": "tinyllama:1b", "stream": False})
    assert pulled.status_code == 200, pulled.text
    gone = httpx.request("DELETE", f"{base}/api/delete", json={"model": "tinyllama:1b"})
    assert gone.status_code == 200
    assert gone.content == b""
    store = tmp_path / "home" / "models" / ".ollama"
    assert not (store / "manifests" / "registry.ollama.ai" / "library" / "tinyllama").exists()
    assert not [p for p in (store / "blobs").iterdir()]
    unknown = httpx.request("DELETE", f"{base}/api/delete", json={"name": "tinyllama:1b"})
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "model 'tinyllama:1b' not found"}

    own = tmp_path / "home" / "models" / "own-Q4_0.gguf"
    shutil.copyfile(tiny_model, own)
    wait_for(lambda: "own-Q4_0" in _names(ld), 15, "the person's file in the library")
    refused = ld.ctl("rm", "own-Q4_0")
    assert refused.returncode == 1
    assert f"its file {own} is in a folder of yours" in refused.stderr
    assert refused.stderr.count("\n") == 1  # one line, no traceback
    theirs = httpx.request("DELETE", f"{base}/api/delete", json={"model": "own-Q4_0"})
    assert theirs.status_code == 409
    assert "not pulled by llamad" in theirs.json()["error"]
    assert own.exists()
