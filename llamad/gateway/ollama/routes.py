"""The Ollama routes: `ollama_routes(gateway)`, for the door's table next to /v1/...."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AsyncExitStack

import structlog
from starlette.responses import Response

from llamad.gateway.access.call import Call
from llamad.gateway.access.table import Body, Need, Route
from llamad.gateway.books.activity import Activity
from llamad.gateway.ollama import thinking
from llamad.gateway.ollama.answer import (
    Render,
    answer,
    chat_renderer,
    generate_renderer,
    keepalive_beat,
    load_only,
)
from llamad.gateway.ollama.context import ContextSizes
from llamad.gateway.ollama.durations import parse_keep_alive
from llamad.gateway.ollama.embed import embed_answer, legacy_answer
from llamad.gateway.ollama.endpoint import Endpoint, Handler, Recorded
from llamad.gateway.ollama.errors import OllamaError, error_response, field
from llamad.gateway.ollama.listings import Listings
from llamad.gateway.ollama.port import GatewayPort, ModelView
from llamad.gateway.ollama.pull import delete_endpoint, downloading, pull_endpoint
from llamad.gateway.ollama.requests import Plan, chat_plan, generate_plan
from llamad.gateway.ollama.upstream import resolve
from llamad.library.pulls import Pulls
from llamad.upstream.pool import Pool

log = structlog.get_logger("llamad.gateway.ollama")

_STORE_ROUTES = ("push", "create", "copy", "blobs")
_STORE_MESSAGE = (
    "llamad serves the models in its config file and its library; it has no Ollama model "
    "store. Pull a model (/api/pull), or add an [instances.NAME] table to llamad.toml."
)


class OllamaAPI:
    """The endpoints, over one gateway and the pool of connections to its llama-servers."""

    def __init__(
        self,
        gateway: GatewayPort,
        pool: Pool,
        pulls: Pulls | None,
        list_aliases: Callable[[], bool],
        activity: Activity | None = None,
        keepalive: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.gateway = gateway
        self.pool = pool
        self.pulls = pulls  # None: no library, /api/pull answers 501
        self.list_aliases = list_aliases
        self.activity = activity
        self.listings = Listings(gateway, ContextSizes(gateway, pool), self._resolve, list_aliases)
        self.keepalive = keepalive

    def _resolve(self, name: str) -> ModelView:
        """The model `name` means; a 404 becomes 503 `downloading` while a pull of it runs
        (asked only then: a routed request pays nothing)."""
        try:
            return resolve(self.gateway, name)
        except OllamaError as exc:
            if exc.status == 404:
                downloading(self.pulls, name)
            raise

    async def chat(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/chat."""
        messages = field(call.doc, "messages", list, [])
        plan = functools.partial(chat_plan, call.doc, messages=messages)
        return await self._turn(call, leases, chat_renderer, bool(messages), plan)

    async def generate(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/generate."""
        prompt = field(call.doc, "prompt", str, "")
        asked = bool(prompt or field(call.doc, "suffix", str))
        plan = functools.partial(generate_plan, call.doc, prompt=prompt)
        return await self._turn(call, leases, generate_renderer, asked, plan)

    async def _turn(
        self,
        call: Call,
        leases: AsyncExitStack,
        renderer: Callable[[str], Render],
        asked: bool,
        plan: Callable[[str], Plan],
    ) -> Response:
        """A chat or generate turn; one that asks nothing only loads the model (Ollama's
        preload), or unloads it with `keep_alive` 0."""
        body, name = call.doc, call.model
        stream = field(body, "stream", bool, True)
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        view = self._resolve(name)
        await thinking.check(view, body, name)
        render = renderer(name)
        if not asked:
            return await load_only(self.gateway, view, keep_alive, render, leases, call)
        return await answer(
            gateway=self.gateway,
            pool=self.pool,
            leases=leases,
            view=view,
            keep_alive=keep_alive,
            plan=plan(view.name),
            render=render,
            stream=stream,
            call=call,
        )

    async def embed(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/embed {input: str | [str]} -> {embeddings: [[...]]}."""
        return await embed_answer(self.gateway, self.pool, self._resolve, call, leases)

    async def embeddings_legacy(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/embeddings {prompt} -> {embedding: [...]} (Ollama's older route)."""
        return await legacy_answer(self.gateway, self.pool, self._resolve, call, leases)

    async def store(self, call: Call, leases: AsyncExitStack) -> Response:
        """pull, push, create, copy, delete, blobs: 501, never a pretended success."""
        return error_response(501, f"{call.path} is not supported: {_STORE_MESSAGE}")

    async def pull(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/pull: from Hugging Face or Ollama's registry into the library."""
        if self.pulls is None:
            return await self.store(call, leases)
        return await pull_endpoint(self.pulls, call)

    async def delete(self, call: Call, leases: AsyncExitStack) -> Response:
        """DELETE /api/delete: a model llamad pulled (never another program's files)."""
        if self.pulls is None:
            return await self.store(call, leases)
        return await delete_endpoint(self.pulls, call.model)

    def routes(self) -> list[Route]:
        """The door's routes, each an `Endpoint`, so errors leave in Ollama's shape."""
        books = None if self.activity is None else Recorded(self.activity)
        model, manage, get, no = Need.MODEL, Need.MANAGE, ("GET", "HEAD"), Body.NONE
        # path, handler, methods, need, body, where the model is named, books
        table: list[tuple[str, Handler, tuple[str, ...], Need, Body, str | None, bool]] = [
            ("/", self.listings.root, get, Need.OPEN, no, None, False),
            ("/api/version", self.listings.version, get, Need.OPEN, no, None, False),
            ("/api/tags", self.listings.tags, get, Need.KEY, no, None, False),
            ("/api/ps", self.listings.ps, get, Need.KEY, no, None, False),
            ("/api/show", self.listings.show, ("POST",), model, Body.JSON, "body", False),
            ("/api/chat", self.chat, ("POST",), model, Body.JSON, "body", True),
            ("/api/generate", self.generate, ("POST",), model, Body.JSON, "body", True),
            ("/api/embed", self.embed, ("POST",), model, Body.JSON, "body", True),
            ("/api/embeddings", self.embeddings_legacy, ("POST",), model, Body.JSON, "body", True),
            ("/api/pull", self.pull, ("POST",), manage, Body.JSON, "body", False),
            ("/api/delete", self.delete, ("DELETE",), manage, Body.JSON, "body", False),
        ]  # fmt: skip
        # Streams that may wait on a load keep alive with an empty chunk of their shape.
        beats = {
            "/api/chat": keepalive_beat(chat_renderer),
            "/api/generate": keepalive_beat(generate_renderer),
        }
        routes: list[Route] = []
        for path, fn, methods, need, body, named, kept in table:
            kept_by = books if kept else None
            endpoint = Endpoint(fn, kept_by, beats.get(path), self.keepalive)
            routes.append(Route(path, methods, need, endpoint, body, named, kept_by))
        store = Endpoint(self.store)
        for name in _STORE_ROUTES:
            methods = ("GET", "HEAD", "POST", "PUT", "DELETE")
            routes.append(Route(f"/api/{name}", methods, manage, store))
        routes.append(Route("/api/blobs/{digest}", ("HEAD", "POST"), manage, store))
        return routes


def ollama_routes(
    gateway: GatewayPort,
    pool: Pool,
    pulls: Pulls | None = None,
    list_aliases: Callable[[], bool] = lambda: True,
    activity: Activity | None = None,
    keepalive: Callable[[], float] = lambda: 0.0,
) -> list[Route]:
    """Ollama's API over `gateway`, as routes of the door's table; upstream requests go
    through `pool`, which the caller owns (the relay's: no read timeout, generations may
    take long). `pulls` serves /api/pull; `list_aliases` says whether /api/tags lists
    aliases as models of their own (`[gateway] list_aliases`); requests that asked for a
    model are recorded in `activity`; a streamed chat or generate waiting on its model
    gets a keep-alive every `keepalive()` seconds (0: none)."""
    return OllamaAPI(gateway, pool, pulls, list_aliases, activity, keepalive).routes()
