"""The Ollama routes: `ollama_routes(gateway)`, for the door's table next to /v1/...."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import structlog
from starlette.responses import JSONResponse, Response

from llamad.gateway.access.call import Call
from llamad.gateway.access.table import Body, Need, Route
from llamad.gateway.books.activity import Activity
from llamad.gateway.ollama import thinking
from llamad.gateway.ollama.answer import (
    answer,
    chat_renderer,
    generate_renderer,
    keepalive_beat,
    load_only,
)
from llamad.gateway.ollama.context import ContextSizes
from llamad.gateway.ollama.durations import done_fields, parse_keep_alive
from llamad.gateway.ollama.embed import dimensions, embed_inputs, embeddings
from llamad.gateway.ollama.endpoint import Endpoint, Handler, Recorded
from llamad.gateway.ollama.errors import OllamaError, error_response, field
from llamad.gateway.ollama.listings import Listings
from llamad.gateway.ollama.port import GatewayPort, ModelView
from llamad.gateway.ollama.pull import delete_endpoint, downloading, pull_endpoint
from llamad.gateway.ollama.requests import chat_plan, generate_plan
from llamad.gateway.ollama.upstream import resolve
from llamad.gateway.relay.upstream_pool import Pool
from llamad.gateway.replicas.hints import HINTS, hints_of
from llamad.library.pulls import Pulls

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
        body, name = call.doc, call.model
        HINTS.set(hints_of(call.scope["headers"], body))  # this request's task alone
        stream = field(body, "stream", bool, True)
        messages = field(body, "messages", list, [])
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        view = self._resolve(name)
        await thinking.check(view, body, name)
        render = chat_renderer(name)
        if not messages:
            return await load_only(self.gateway, view, keep_alive, render, leases)
        plan = chat_plan(body, view.name, messages)
        return await answer(
            gateway=self.gateway,
            pool=self.pool,
            leases=leases,
            view=view,
            keep_alive=keep_alive,
            plan=plan,
            render=render,
            stream=stream,
        )

    async def generate(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/generate."""
        body, name = call.doc, call.model
        HINTS.set(hints_of(call.scope["headers"], body))  # this request's task alone
        stream = field(body, "stream", bool, True)
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        view = self._resolve(name)
        await thinking.check(view, body, name)
        render = generate_renderer(name)
        if not prompt and not field(body, "suffix", str):
            return await load_only(self.gateway, view, keep_alive, render, leases)
        return await answer(
            gateway=self.gateway,
            pool=self.pool,
            leases=leases,
            view=view,
            keep_alive=keep_alive,
            plan=generate_plan(body, view.name, prompt),
            render=render,
            stream=stream,
        )

    async def embed(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/embed {input: str | [str]} -> {embeddings: [[...]]}."""
        body, name = call.doc, call.model
        inputs = embed_inputs(body.get("input", ""))
        extra = dimensions(body.get("dimensions"))
        view = self._resolve(name)
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        vectors, tokens, ex = await embeddings(
            self.gateway, self.pool, view, keep_alive, inputs, extra, leases
        )
        timing = done_fields(
            reason="stop",
            timings=None,
            usage={"prompt_tokens": tokens},
            total_seconds=ex.elapsed(),
            load_seconds=ex.load_seconds,
        )
        out: dict[str, Any] = {"model": name, "embeddings": vectors}
        for key in ("total_duration", "load_duration", "prompt_eval_count"):
            out[key] = timing[key]
        return JSONResponse(out)

    async def embeddings_legacy(self, call: Call, leases: AsyncExitStack) -> Response:
        """POST /api/embeddings {prompt} -> {embedding: [...]} (Ollama's older route)."""
        body = call.doc
        view = self._resolve(call.model)
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        if not prompt:
            return JSONResponse({"embedding": []})
        vectors, _, _ = await embeddings(
            self.gateway, self.pool, view, keep_alive, [prompt], {}, leases
        )
        return JSONResponse({"embedding": vectors[0]})

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
