"""The gateway's request limits: `[gateway] max_body`, an instance's own, the deadline,
and the bounds on what the gateway itself does for a request (shaping/).

The listener (`llamad/listener`) refuses a body over the largest limit any model
has, by its Content-Length before reading it or as a chunked body grows. Only when some
instance allows more than `[gateway] max_body` can a body between the two arrive; the
door (`access/body.py`) answers 413 when the model it names allows less.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from llamad.backends.spec import InstanceSpec
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.contract.families import gateway_shape
from llamad.listener.limits import Limits

__all__ = ["MAX_CHOICES", "MAX_HELD", "MAX_SCHEMA_NODES", "GatewayLimits", "gateway_shape"]

# `n`: OpenAI's own bound; each choice is one more upstream request.
MAX_CHOICES = 128
# A request's JSON schemas, counted as the grammars they become (schemas.py): an enum
# value, a property, each branch of a `type` list a copy of its schema. llama-server's
# grammar costs grow past linear with them (20,000 enum values: 3.7 s for 10 tokens).
MAX_SCHEMA_NODES = 5_000
# The bytes of llama-server's answers the gateway holds to build one answer itself (all
# `n` choices are in before it is written; a stream holds none): logprobs run to the
# whole vocabulary per token, and Python holds ~6x the bytes it parses.
MAX_HELD = 32 * 2**20


class GatewayLimits:
    """The limits in force, from the current `[gateway]` and instances (reloads apply)."""

    def __init__(
        self, settings: Callable[[], GatewayConfig], specs: Callable[[], Mapping[str, InstanceSpec]]
    ) -> None:
        self.settings, self.specs = settings, specs
        self._seen: tuple[object, object] | None = None
        self._limits = Limits()

    def __call__(self) -> Limits:
        """The listener's limits: a body up to the largest any model allows."""
        s, specs = self.settings(), self.specs()
        if self._seen is None or self._seen[0] is not s or self._seen[1] is not specs:
            ceiling = max([s.max_body, *(spec.max_body or 0 for spec in specs.values())])
            self._limits = Limits(
                max_body=ceiling,
                request_timeout=s.request_timeout,
                trust_loopback=s.trust_loopback,
            )
            self._seen = (s, specs)
        return self._limits

    @property
    def default(self) -> int:
        """`[gateway] max_body`."""
        return self.settings().max_body

    def for_model(self, name: str) -> int:
        """The body limit for requests to model `name` (an instance name or alias; the
        largest of its replicas' when instances share it: any of them may serve it)."""
        name = name.removesuffix(":latest")
        found = [
            spec.max_body or self.default
            for spec in self.specs().values()
            if name == spec.name or name in spec.aliases
        ]
        return max(found, default=self.default)
