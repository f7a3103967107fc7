"""Capabilities from the header and the instance's settings together."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from llamad.backends.gguf_meta import read_gguf_meta
from llamad.backends.serving import Serving
from llamad.gateway.contract.port import ModelView
from llamad.gateway.ollama.capabilities import capabilities

VIEW = ModelView("m", (), None, "running", True, False, 0.0, None, None, None, False)


def test_the_header_alone(tiny_model: Path) -> None:
    meta = read_gguf_meta(tiny_model)
    assert capabilities(VIEW, meta) == ["completion", "tools", "insert"]


def test_the_instance_adds_embedding_and_vision(tiny_model: Path) -> None:
    meta = read_gguf_meta(tiny_model)
    view = replace(VIEW, serving=Serving(embeddings=True, vision=True))
    assert capabilities(view, meta) == ["completion", "tools", "embedding", "vision", "insert"]


def test_the_template_in_use_decides_tools_and_thinking(tiny_model: Path, tmp_path: Path) -> None:
    meta = read_gguf_meta(tiny_model)
    plain = replace(VIEW, serving=Serving(template="{{ messages[0].content }}"))
    assert capabilities(plain, meta) == ["completion", "insert"]
    config = tmp_path / "tokenizer_config.json"
    template = "{% if tools %}{{ tools }}{% endif %}{% if enable_thinking %}<think>{% endif %}"
    config.write_text(json.dumps({"chat_template": template}))
    mlx = replace(VIEW, serving=Serving(template_file=config))
    assert capabilities(mlx, None) == ["completion", "tools", "thinking"]
