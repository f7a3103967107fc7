"""What a model can do, in Ollama's words, from its header and how its instance serves it.

- `completion` unless it is an embedding-only model (a pooling type and no chat template);
- `embedding` when the instance serves embeddings (`embeddings`, a pooling type) or the
  header gives a pooling type;
- `vision` when the instance has an mmproj;
- `tools` and `thinking` from the chat template the instance actually uses (its own
  `chat_template`/`chat_template_file`, else the model's);
- `insert` when the model has fill-in-the-middle tokens.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from llamad.backends.gguf_meta import GGUFMeta
from llamad.gateway.contract.port import ModelView

# What templates that render a model's reasoning look for or write.
_THINKING = ("enable_thinking", "reasoning_content", "<think>", "thinking")


def template(view: ModelView, meta: GGUFMeta | None) -> str:
    """The chat template the instance uses: its own setting, else the model's."""
    serving = view.serving
    if serving.template:
        return serving.template
    if serving.template_file is not None:
        return _read_template(serving.template_file)
    return (meta.chat_template if meta else None) or ""


def capabilities(view: ModelView, meta: GGUFMeta | None) -> list[str]:
    """The model's capabilities, in Ollama's order."""
    text = template(view, meta)
    pooled = meta is not None and meta.pooling_type is not None
    caps = []
    if not (pooled and not text):
        caps.append("completion")
    if "tools" in text:
        caps.append("tools")
    if pooled or view.serving.embeddings:
        caps.append("embedding")
    if view.serving.vision or view.mmproj:
        caps.append("vision")
    if any(word in text for word in _THINKING):
        caps.append("thinking")
    if meta is not None and meta.has_fim:
        caps.append("insert")
    return caps


@lru_cache(maxsize=64)
def _read_cached(path: Path, mtime_ns: int) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":  # tokenizer_config.json: the template is one of its keys
        try:
            value = json.loads(text).get("chat_template")
        except (ValueError, AttributeError):
            return ""
        if isinstance(value, list):  # named templates: [{name, template}, ...]
            value = " ".join(str(t.get("template", "")) for t in value if isinstance(t, dict))
        return value if isinstance(value, str) else ""
    return text


def _read_template(path: Path) -> str:
    try:
        return _read_cached(path, path.stat().st_mtime_ns)
    except OSError:
        return ""
