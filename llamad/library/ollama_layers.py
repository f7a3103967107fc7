"""An Ollama model's `template`, `system` and `params` layers, taken as Ollama takes them.

- `params`: the options llama-server also has become its settings (`num_ctx` ->
  `ctx_size`, `temperature` -> `temp`, ...); `stop`, which llama-server takes only per
  request, becomes a request default the gateway adds.
- `system`: the default system prompt, a request default too.
- `template`: its family's Jinja template (`ollama_template.translate`), unless the
  GGUF's own is of that family; one that is not recognised leaves the GGUF's in use,
  with a note.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamad.backends.gguf_meta import read_gguf_meta
from llamad.backends.prompt import PromptDefaults
from llamad.common.storefile import read_small
from llamad.library.ollama_template import translate

_MT = "application/vnd.ollama.image."
PARAMS, TEMPLATE, SYSTEM = _MT + "params", _MT + "template", _MT + "system"
_MAX_BLOB = 1 << 20  # layers other than the model's are small text
# Ollama's options that are llama-server settings too (as defaults for every request).
PARAM_KEYS = {
    "num_ctx": "ctx_size",
    "temperature": "temp",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "typical_p": "typical",
    "repeat_penalty": "repeat_penalty",
    "repeat_last_n": "repeat_last_n",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "num_predict": "n_predict",
    "num_keep": "keep",
}


@dataclass(frozen=True)
class Taken:
    """What the layers give the model: settings, request defaults, a note."""

    settings: dict[str, Any] = field(default_factory=dict)
    prompt: PromptDefaults | None = None
    note: str | None = None


def take_layers(blobs: dict[str, Path], gguf: Path) -> Taken:
    """The model's settings and defaults from its layers (`blobs`: media type -> blob
    file) and its GGUF at `gguf`; a layer that cannot be read is left out, with a note."""
    texts, unread = _read_layers(blobs)
    params = _json(texts.get(PARAMS))
    settings: dict[str, Any] = {
        PARAM_KEYS[k]: v
        for k, v in params.items()
        if k in PARAM_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
    }
    stop = params.get("stop")
    stops = (stop,) if isinstance(stop, str) else stop if isinstance(stop, list) else ()
    system = texts.get(SYSTEM)
    template = texts.get(TEMPLATE)
    notes = unread
    if template is not None:
        done = translate(template, _gguf_template(gguf))
        notes = [*notes, *filter(None, [done.note])]
        if done.chat_template is not None:
            settings["chat_template"] = done.chat_template
    prompt = PromptDefaults(
        system=system or None,
        stop=tuple(s for s in stops if isinstance(s, str) and s),
        template=template,
    )
    return Taken(settings, prompt if prompt != PromptDefaults() else None, "; ".join(notes) or None)


def _read_layers(blobs: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """Each layer's text, and a line for each one left out (a FIFO, a device, too big)."""
    texts, unread = {}, []
    for media, path in blobs.items():
        try:
            texts[media] = read_small(path, _MAX_BLOB).decode("utf-8", "replace")
        except OSError as exc:
            unread.append(f"its {media.removeprefix(_MT)} layer is left out ({exc.strerror})")
    return texts, unread


def _gguf_template(path: Path) -> str | None:
    try:
        return read_gguf_meta(path).chat_template
    except (OSError, ValueError):
        return None


def _json(text: str | None) -> dict[str, Any]:
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
