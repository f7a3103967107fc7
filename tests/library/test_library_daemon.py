"""A daemon with no [instances]: every model in the fake home's stores answers a chat
under the name its program gives it, and the library follows its folders while it runs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad, free_port, short_dir, wait_for
from library_helpers import fake_home

pytestmark = pytest.mark.timeout(120)


def _chat(base: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    body["options"] = {"num_predict": 2}
    return httpx.post(f"{base}/api/chat", json=body, timeout=60)


def _names(base: str) -> set[str]:
    data = httpx.get(f"{base}/v1/models", timeout=5).json()["data"]
    return {m["id"] for m in data}


def test_models_on_disk_answer_by_their_names_and_follow_the_folders(
    tmp_path: Path, tiny_model: Path
) -> None:
    home = fake_home(tmp_path / "home", tiny_model)
    d = short_dir()
    port = free_port()
    cfg = d / "llamad.toml"
    cfg.write_text(
        f'[daemon]\nstate_dir = "{d}/state"\n[supervise]\nhealth_interval = 0.5\n'
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n[library.defaults]\nctx_size = 256\n'
    )
    env = {"HOME": str(home.home), "HF_HUB_CACHE": str(home.home / ".cache/huggingface/hub")}
    base = f"http://127.0.0.1:{port}"
    with Llamad(cfg, env) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        wait_for(lambda: _names(base), 10, "the gateway answering")
        expected = {
            "tiny-folder-Q8_0",
            "tiny-lms-Q4_K_M",
            "tinyllama:1b",
            "someone/Tiny-GGUF:Q4_K_M",
        }
        assert _names(base) == expected
        tags = httpx.get(f"{base}/api/tags", timeout=10).json()["models"]
        assert "tinyllama:1b" in {t["name"] for t in tags}
        for name in [*sorted(expected), "hf.co/someone/Tiny-GGUF:Q4_K_M"]:
            reply = _chat(base, name)
            assert reply.status_code == 200, (name, reply.text)
            assert reply.json()["done"] is True

        # A file copied in under its final name is served once complete, never before.
        models = home.home / "models"
        data = tiny_model.read_bytes()
        half = models / "arriving.gguf"
        half.write_bytes(data[: len(data) // 2])
        ld.wait_event("library.unusable", model="arriving")
        assert "arriving" not in _names(base)
        assert _chat(base, "arriving").status_code == 404
        half.write_bytes(data)
        wait_for(lambda: "arriving" in _names(base), 15, "the completed file routable")
        assert _chat(base, "arriving").status_code == 200

        # A file removed: its model goes; the others are not touched.
        pid: Any = ld.instance("tiny-folder-Q8_0")["pid"]
        shutil.copyfile(tiny_model, models / "second.gguf")
        home.lmstudio_model.unlink()
        wait_for(lambda: "tiny-lms-Q4_K_M" not in _names(base), 15, "the removed model gone")
        wait_for(lambda: "second" in _names(base), 15, "the new model routable")
        assert ld.instance("tiny-folder-Q8_0")["pid"] == pid
        assert ld.events("library.gone", model="tiny-lms-Q4_K_M")
        assert ld.stop() == 0
