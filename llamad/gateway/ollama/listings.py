"""The Ollama endpoints that describe models without running one: `/`, /api/version,
/api/tags, /api/ps and /api/show."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from starlette.responses import JSONResponse, PlainTextResponse, Response

from llamad.backends.gguf_meta import GGUFMeta
from llamad.gateway.access.call import Call
from llamad.gateway.models import listing
from llamad.gateway.models.tags import tagged
from llamad.gateway.ollama import metadata
from llamad.gateway.ollama.context import ContextSizes
from llamad.gateway.ollama.port import GatewayPort, ModelView

# The Ollama version we claim: VS Code Copilot refuses anything below 0.6.4, and clients
# turn on thinking and tool support by version.
OLLAMA_VERSION = "0.12.0"


class Listings:
    """Answers from the gateway's models and their GGUF headers; `resolve` finds the
    model a name means (503 `downloading` while it is being pulled)."""

    def __init__(
        self,
        gateway: GatewayPort,
        contexts: ContextSizes,
        resolve: Callable[[str], ModelView],
        list_aliases: Callable[[], bool],
    ) -> None:
        self.gateway = gateway
        self.contexts = contexts
        self._resolve = resolve
        self.list_aliases = list_aliases

    async def root(self, call: Call, leases: AsyncExitStack) -> Response:
        """HEAD / and GET /: the liveness answer Ollama's clients probe for."""
        return PlainTextResponse("Ollama is running")

    async def version(self, call: Call, leases: AsyncExitStack) -> Response:
        """GET /api/version."""
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, call: Call, leases: AsyncExitStack) -> Response:
        """GET /api/tags: every routable model the caller may use, from headers only
        (never waits on a load)."""
        views = self.gateway.models(call.caller)
        metas = dict(zip((v.name for v in views), await metadata.headers(views), strict=True))
        listed = listing.names(views, self.list_aliases(), tagged)
        models = [metadata.tag_entry(v, metas[v.name], n, a) for n, v, a in listed]
        return JSONResponse({"models": models})

    async def ps(self, call: Call, leases: AsyncExitStack) -> Response:
        """GET /api/ps: the loaded models with their expiry."""
        # Each process once: an alias instances share lists as those instances.
        views = [v for v in self.gateway.models(call.caller) if v.loaded and not v.instances]
        metas = await metadata.headers(views)
        models = [
            metadata.ps_entry(v, m, await self._num_ctx(v, m))
            for v, m in zip(views, metas, strict=True)
        ]
        return JSONResponse({"models": models})

    async def show(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/show {model | name}."""
        view = self._resolve(call.model)
        meta = await metadata.header(view)
        return JSONResponse(metadata.show(view, meta, await self._num_ctx(view, meta)))

    async def _num_ctx(self, view: ModelView, meta: GGUFMeta | None) -> int | None:
        return await self.contexts.of(view, meta.context_length if meta else None)
