"""What a proxy must change in a request before mlx_lm.server sees it.

mlx_lm.server loads whatever a request names: `model`, `draft_model` or `adapters` can make
it download (offline: fail) and switch away from the model llamad started it with, for
every client. So they are pinned to "default_model", the server's own name for the
model on its command line, or dropped.
"""

from __future__ import annotations

import json

DEFAULT_MODEL = "default_model"
_DROPPED = ("draft_model", "adapters")


def pin_model(body: bytes) -> bytes:
    """`body` with `model` pinned and the model-switching fields dropped; a body that is
    not a JSON object is passed on unchanged (the server answers it with its own error)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    doc["model"] = DEFAULT_MODEL
    for key in _DROPPED:
        doc.pop(key, None)
    return json.dumps(doc).encode()
