"""llama-server's own documents, relayed under /props and /upstream/..., without file paths.

`/props` names the GGUF in `model_path` (a hub model's too, in llama-server's cache),
`/lora-adapters` each adapter's `path`; clients have no need of either, and a path names
the user's home. A JSON answer to a GET there is held whole (they are small), and given
back with `model_path` as the name asked for, the model's file as that name wherever it
appears, and any other `path`/`*_path` cut to its file name. Anything else (the web
page, text) passes as it comes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llamad.gateway.contract.port import without_paths


class DocScrub:
    """Rewrites one relayed answer (the relay's `naming.Rewrite`): whole if JSON."""

    def __init__(self, asked: str, model_path: Path | None) -> None:
        self.asked = asked
        self.file = str(model_path) if model_path is not None else None
        self.whole: bool | None = None  # decided by the first chunk
        self.parts: list[bytes] = []

    def __call__(self, chunk: bytes) -> bytes:
        """Nothing yet for a JSON document (it is given whole by `flush`); else `chunk`."""
        if self.whole is None:
            self.whole = chunk.lstrip()[:1] in (b"{", b"[")
        if not self.whole:
            return chunk
        self.parts.append(chunk)
        return b""

    def flush(self) -> bytes:
        """The JSON document held, without file paths."""
        raw, self.parts = b"".join(self.parts), []
        if not raw:
            return raw
        try:
            doc = json.loads(raw)
        except ValueError:
            return raw  # not JSON after all: as it came
        return json.dumps(self._clean(doc), ensure_ascii=False, separators=(",", ":")).encode()

    def _clean(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self._clean(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self._clean(v, key) for v in value]
        if not isinstance(value, str):
            return value
        if key == "model_path":
            return self.asked
        if self.file and self.file in value:
            value = value.replace(self.file, self.asked)
        if key == "path" or key.endswith("_path"):
            return without_paths(value)
        return value
