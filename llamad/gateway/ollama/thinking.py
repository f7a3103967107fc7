"""`think` for a model that cannot think: Ollama's 400, which apps read to hide their
thinking toggle. A model that can gets it as llama-server's reasoning options
(`requests._chat_extras`), its reasoning coming back as `thinking`."""

from __future__ import annotations

import json
from typing import Any

from llamad.gateway.ollama import capabilities, metadata
from llamad.gateway.ollama.errors import OllamaError
from llamad.gateway.ollama.port import ModelView


def wants(think: Any) -> bool:
    """Whether `think` turns thinking on: `true` or a level ("low", "high"...)."""
    return think is True or (isinstance(think, str) and think not in ("", "false"))


async def check(view: ModelView, body: dict[str, Any], asked: str) -> None:
    """A 400 in Ollama's words when `body` asks `view` to think and its template cannot.
    A model whose template is unknown (no header read, none configured) is let through:
    llama-server decides."""
    if not wants(body.get("think")):
        return
    meta = await metadata.header(view)
    if meta is None and not capabilities.template(view, None):
        return
    if "thinking" not in capabilities.capabilities(view, meta):
        raise OllamaError(400, f"{json.dumps(asked, ensure_ascii=False)} does not support thinking")
