"""How an instance serves its model, as the gateway's answers and listings need it.

Each backend reads its own settings into a `Serving`, so the gateway never looks at an
instance's kind or at backend-specific option names to know what a model can do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Serving:
    """What one instance's server does with its model (from its spec, before it runs)."""

    # The `model` the server writes in its answers; the gateway rewrites it to the name
    # the client asked for when the two differ. None: the name in the request.
    answer_name: str | None = None
    embeddings: bool = False  # it serves /v1/embeddings (embeddings on, or a pooling type)
    vision: bool = False  # it takes images (an mmproj)
    # The chat template it uses in place of the model's own: inline text, or a file to
    # read (a jinja file, or a tokenizer_config.json's `chat_template`).
    template: str | None = None
    template_file: Path | None = None
    # Tokens each request may use, computed from the spec (context / parallel slots);
    # None: the model's trained context, as the server takes it.
    ctx_per_request: int | None = None
    slots: int = 1  # requests it serves at once; more wait inside the server
    # Where the running server lists its slots, each with `is_processing` (llama-server's
    # `/slots`, on unless turned off); None: it does not say, the gateway counts alone.
    busy_path: str | None = None
