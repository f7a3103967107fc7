"""The real small model answers sensibly when llamad gives it Gemma's chat template."""

from __future__ import annotations

from pathlib import Path

import httpx
from helpers import Llamad, free_port, wait_for, write_config


def test_gemma_answers_with_its_template(
    tmp_path: Path, real_model: Path, real_model_template: Path
) -> None:
    """The model carries no template: with Gemma's it knows Paris."""
    port = free_port()
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "gemma": {
                "model": real_model,
                "port": port,
                "ctx_size": 1024,
                "chat_template_file": real_model_template,
                "threads": 2,
            }
        },
        daemon={"state_dir": str(tmp_path / "state")},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        wait_for(lambda: d.instance("gemma")["state"] == "running", 60, "gemma running")
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "What is the capital of France?"}],
                "max_tokens": 12,
                "temperature": 0,
            },
            timeout=60,
        ).json()
        assert "Paris" in answer["choices"][0]["message"]["content"]
        assert d.stop() == 0
