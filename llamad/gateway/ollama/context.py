"""The context each request gets: what /api/ps and /api/show report as the model's.

llama-server splits `ctx_size` over its slots, so a request gets `ctx_size / parallel`
tokens, and it may round that. Once the instance runs, its own figure from `/props`
(`default_generation_settings.n_ctx`) is the answer, asked once per process; before, the
figure computed from the spec (`Serving.ctx_per_request`), else the trained context.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from llamad.gateway.contract.port import GatewayPort, ModelView, Upstream
from llamad.upstream.pool import Pool, encode

# A wedged instance must not hold a listing up.
PROPS_TIMEOUT = 2.0


class ContextSizes:
    """Per-request context of each model, llama-server's figure cached per process."""

    def __init__(self, gateway: GatewayPort, pool: Pool) -> None:
        self.gateway, self.pool = gateway, pool
        self._known: dict[str, tuple[int | None, int]] = {}  # name -> (pid, n_ctx)

    async def of(self, view: ModelView, trained: int | None) -> int | None:
        """Tokens one request of `view` may use (prompt and answer together)."""
        computed = view.serving.ctx_per_request or trained
        upstream = self.gateway.running(view.name) if view.host is None else None
        if upstream is None:
            return computed
        known = self._known.get(view.name)
        if known is not None and known[0] == upstream.pid:
            return known[1]
        try:
            n_ctx = await asyncio.wait_for(self._props(upstream), PROPS_TIMEOUT)
        except (OSError, TimeoutError, ValueError):
            n_ctx = None
        if n_ctx is None:
            return computed
        self._known[view.name] = (upstream.pid, n_ctx)
        return n_ctx

    async def _props(self, upstream: Upstream) -> int | None:
        headers = [(b"accept", b"application/json"), *encode(upstream.headers)]
        answer = await self.pool.request("GET", upstream.base_url, "/props", headers, None)
        try:
            raw = await answer.aread()
        finally:
            answer.close()
        if answer.status != 200:
            return None  # mlx_lm.server has no /props
        doc: Any = json.loads(raw)
        n_ctx = (doc.get("default_generation_settings") or {}).get("n_ctx")
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
