"""The Ollama routes: `ollama_routes(gateway)` for the gateway app to mount next to /v1/...."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from llamad.gateway.activity import Activity
from llamad.gateway.context import ContextSizes
from llamad.gateway.ollama.answer import (
    answer,
    chat_renderer,
    generate_renderer,
    keepalive_beat,
    load_only,
)
from llamad.gateway.ollama.durations import done_fields, parse_keep_alive
from llamad.gateway.ollama.embed import dimensions, embed_inputs, embeddings
from llamad.gateway.ollama.endpoint import Endpoint, Handler
from llamad.gateway.ollama.errors import (
    OllamaError,
    error_response,
    field,
    model_name,
    read_body,
)
from llamad.gateway.ollama.listings import Listings
from llamad.gateway.ollama.port import GatewayPort, ModelView
from llamad.gateway.ollama.pull import delete_endpoint, downloading, pull_endpoint
from llamad.gateway.ollama.requests import chat_plan, generate_plan
from llamad.gateway.ollama.upstream import resolve
from llamad.gateway.pool import Pool
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

    async def chat(self, request: Request, leases: AsyncExitStack) -> Response:
        """POST /api/chat."""
        body = await read_body(request)
        HINTS.set(hints_of(request.headers.raw, body))  # this request's task alone
        name = model_name(body)
        stream = field(body, "stream", bool, True)
        messages = field(body, "messages", list, [])
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        view = self._resolve(name)
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

    async def generate(self, request: Request, leases: AsyncExitStack) -> Response:
        """POST /api/generate."""
        body = await read_body(request)
        HINTS.set(hints_of(request.headers.raw, body))  # this request's task alone
        name = model_name(body)
        stream = field(body, "stream", bool, True)
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        view = self._resolve(name)
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

    async def embed(self, request: Request, leases: AsyncExitStack) -> Response:
        """POST /api/embed {input: str | [str]} -> {embeddings: [[...]]}."""
        body = await read_body(request)
        name = model_name(body)
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

    async def embeddings_legacy(self, request: Request, leases: AsyncExitStack) -> Response:
        """POST /api/embeddings {prompt} -> {embedding: [...]} (Ollama's older route)."""
        body = await read_body(request)
        view = self._resolve(model_name(body))
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        if not prompt:
            return JSONResponse({"embedding": []})
        vectors, _, _ = await embeddings(
            self.gateway, self.pool, view, keep_alive, [prompt], {}, leases
        )
        return JSONResponse({"embedding": vectors[0]})

    async def store(self, request: Request, leases: AsyncExitStack) -> Response:
        """pull, push, create, copy, delete, blobs: 501, never a pretended success."""
        return error_response(501, f"{request.url.path} is not supported: {_STORE_MESSAGE}")

    async def pull(self, request: Request, leases: AsyncExitStack) -> Response:
        """POST /api/pull: from Hugging Face or Ollama's registry into the library."""
        if self.pulls is None:
            return await self.store(request, leases)
        return await pull_endpoint(self.pulls, request)

    async def delete(self, request: Request, leases: AsyncExitStack) -> Response:
        """DELETE /api/delete: a model llamad pulled (never another program's files)."""
        if self.pulls is None:
            return await self.store(request, leases)
        return await delete_endpoint(self.pulls, request)

    def routes(self) -> list[BaseRoute]:
        """The Starlette routes, each guarded so errors leave in Ollama's shape."""
        table: list[tuple[str, Handler, list[str]]] = [
            ("/", self.listings.root, ["GET", "HEAD"]),
            ("/api/version", self.listings.version, ["GET", "HEAD"]),
            ("/api/tags", self.listings.tags, ["GET", "HEAD"]),
            ("/api/ps", self.listings.ps, ["GET", "HEAD"]),
            ("/api/show", self.listings.show, ["POST"]),
            ("/api/chat", self.chat, ["POST"]),
            ("/api/generate", self.generate, ["POST"]),
            ("/api/embed", self.embed, ["POST"]),
            ("/api/embeddings", self.embeddings_legacy, ["POST"]),
            ("/api/pull", self.pull, ["POST"]),
            ("/api/delete", self.delete, ["DELETE"]),
        ]
        # Streams that may wait on a load keep alive with an empty chunk of their shape.
        beats = {
            "/api/chat": keepalive_beat(chat_renderer),
            "/api/generate": keepalive_beat(generate_renderer),
        }
        routes: list[BaseRoute] = [
            Route(
                path,
                Endpoint(fn, self.activity, beats.get(path), self.keepalive),
                methods=methods,
            )
            for path, fn, methods in table
        ]
        for name in _STORE_ROUTES:
            methods = ["GET", "HEAD", "POST", "PUT", "DELETE"]
            routes.append(Route(f"/api/{name}", Endpoint(self.store), methods=methods))
        routes.append(Route("/api/blobs/{digest}", Endpoint(self.store), methods=["HEAD", "POST"]))
        return routes


def ollama_routes(
    gateway: GatewayPort,
    pool: Pool,
    pulls: Pulls | None = None,
    list_aliases: Callable[[], bool] = lambda: True,
    activity: Activity | None = None,
    keepalive: Callable[[], float] = lambda: 0.0,
) -> list[BaseRoute]:
    """Ollama's API over `gateway`; upstream requests go through `pool`, which the caller
    owns (the relay's: no read timeout, generations may take long). `pulls` serves
    /api/pull; `list_aliases` says whether /api/tags lists aliases as models of their own
    (`[gateway] list_aliases`); requests that asked for a model are recorded in
    `activity`; a streamed chat or generate waiting on its model gets a keep-alive every
    `keepalive()` seconds (0: none)."""
    return OllamaAPI(gateway, pool, pulls, list_aliases, activity, keepalive).routes()
