"""What a model's store asks of every request to it, where the request does not say:
a default system prompt and stop words (Ollama's `system` layer and its params' `stop`).

llama-server has no server-wide setting for either, so the gateway adds them to each
request (`llamad.gateway.relay.prompt_defaults`). A configured instance's own `system` and
`stop` keys set them too, over its store's. They ride on the instance's spec without
being part of its launch: changing them never restarts the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptDefaults:
    """A model's request defaults, and its store's own template text to show."""

    system: str | None = None  # the system prompt of a chat that sends none
    stop: tuple[str, ...] = ()  # stop words of a request that names none
    # The store's template as written (Ollama's Go template), for `/api/show`.
    template: str | None = None

    @property
    def active(self) -> bool:
        """Whether a request's body needs changing for them."""
        return bool(self.system) or bool(self.stop)


def merged(
    store: PromptDefaults | None, system: str | None, stop: Sequence[str] | None
) -> PromptDefaults | None:
    """An instance's request defaults: its table's `system` and `stop` (None: not set)
    over its store's. A table's empty value wins too: no default at all."""
    base = store or PromptDefaults()
    out = PromptDefaults(
        system=(base.system if system is None else system) or None,
        stop=base.stop if stop is None else tuple(stop),
        template=base.template,
    )
    return None if out == PromptDefaults() else out
