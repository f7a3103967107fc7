"""The Ollama routes: `ollama_routes(gateway)` for the gateway app to mount next to /v1/...."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from llamad.gateway.ollama import metadata
from llamad.gateway.ollama.answer import answer, chat_renderer, generate_renderer, load_only
from llamad.gateway.ollama.durations import done_fields, parse_keep_alive
from llamad.gateway.ollama.embed import dimensions, embed_inputs, embeddings
from llamad.gateway.ollama.errors import OllamaError, error_response, field, model_name, read_body
from llamad.gateway.ollama.port import Gateway
from llamad.gateway.ollama.pull import downloading, pull_endpoint
from llamad.gateway.ollama.requests import chat_plan, generate_plan
from llamad.gateway.ollama.upstream import resolve
from llamad.library.pulls import Pulls

log = structlog.get_logger("llamad.gateway.ollama")

# The Ollama version we claim: VS Code Copilot refuses anything below 0.6.4, and clients
# turn on thinking and tool support by version.
OLLAMA_VERSION = "0.12.0"

_STORE_ROUTES = ("push", "create", "copy", "delete", "blobs")
_STORE_MESSAGE = (
    "llamad serves the models in its config file and its library; it has no Ollama model "
    "store. Pull a model (/api/pull), or add an [instances.NAME] table to llamad.toml."
)

Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(endpoint: Endpoint) -> Endpoint:
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except OllamaError as exc:
            return error_response(exc.status, exc.message, exc.retry_after)
        except Exception:
            log.exception("ollama.request_failed", method=request.method, path=request.url.path)
            return error_response(500, "internal error in llamad's Ollama API; see its log")

    return wrapper


class OllamaAPI:
    """The endpoints, over one gateway and one pooled HTTP client to the llama-servers."""

    def __init__(
        self, gateway: Gateway, client: httpx.AsyncClient, pulls: Pulls | None = None
    ) -> None:
        self.gateway = gateway
        self.client = client
        self.pulls = pulls  # None: no library, /api/pull answers 501

    async def root(self, request: Request) -> Response:
        """HEAD / and GET /: the liveness answer Ollama's clients probe for."""
        return PlainTextResponse("Ollama is running")

    async def version(self, request: Request) -> Response:
        """GET /api/version."""
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        """GET /api/tags: every routable model, from headers only (never waits on a load)."""
        views = self.gateway.models()
        metas = await metadata.headers(views)
        models = [metadata.tag_entry(v, m) for v, m in zip(views, metas, strict=True)]
        return JSONResponse({"models": models})

    async def ps(self, request: Request) -> Response:
        """GET /api/ps: the loaded models with their expiry."""
        views = [v for v in self.gateway.models() if v.loaded]
        metas = await metadata.headers(views)
        models = [metadata.ps_entry(v, m) for v, m in zip(views, metas, strict=True)]
        return JSONResponse({"models": models})

    async def show(self, request: Request) -> Response:
        """POST /api/show {model | name}."""
        view = resolve(self.gateway, model_name(await read_body(request)))
        return JSONResponse(metadata.show(view, await metadata.header(view)))

    async def chat(self, request: Request) -> Response:
        """POST /api/chat."""
        body = await read_body(request)
        name = model_name(body)
        stream = field(body, "stream", bool, True)
        messages = field(body, "messages", list, [])
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        downloading(self.pulls, name)
        view = resolve(self.gateway, name)
        render = chat_renderer(name)
        if not messages:
            return await load_only(self.gateway, view, keep_alive, render)
        plan = chat_plan(body, view.name, messages)
        return await answer(
            gateway=self.gateway,
            client=self.client,
            view=view,
            keep_alive=keep_alive,
            plan=plan,
            render=render,
            stream=stream,
        )

    async def generate(self, request: Request) -> Response:
        """POST /api/generate."""
        body = await read_body(request)
        name = model_name(body)
        stream = field(body, "stream", bool, True)
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        downloading(self.pulls, name)
        view = resolve(self.gateway, name)
        render = generate_renderer(name)
        if not prompt and not field(body, "suffix", str):
            return await load_only(self.gateway, view, keep_alive, render)
        return await answer(
            gateway=self.gateway,
            client=self.client,
            view=view,
            keep_alive=keep_alive,
            plan=generate_plan(body, view.name, prompt),
            render=render,
            stream=stream,
        )

    async def embed(self, request: Request) -> Response:
        """POST /api/embed {input: str | [str]} -> {embeddings: [[...]]}."""
        body = await read_body(request)
        name = model_name(body)
        inputs = embed_inputs(body.get("input", ""))
        extra = dimensions(body.get("dimensions"))
        view = resolve(self.gateway, name)
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        vectors, tokens, ex = await embeddings(
            self.gateway, self.client, view, keep_alive, inputs, extra
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

    async def embeddings_legacy(self, request: Request) -> Response:
        """POST /api/embeddings {prompt} -> {embedding: [...]} (Ollama's older route)."""
        body = await read_body(request)
        view = resolve(self.gateway, model_name(body))
        prompt = field(body, "prompt", str, "")
        keep_alive = parse_keep_alive(body.get("keep_alive"))
        if not prompt:
            return JSONResponse({"embedding": []})
        vectors, _, _ = await embeddings(self.gateway, self.client, view, keep_alive, [prompt], {})
        return JSONResponse({"embedding": vectors[0]})

    async def store(self, request: Request) -> Response:
        """pull, push, create, copy, delete, blobs: 501, never a pretended success."""
        return error_response(501, f"{request.url.path} is not supported: {_STORE_MESSAGE}")

    async def pull(self, request: Request) -> Response:
        """POST /api/pull: from Hugging Face or Ollama's registry into the library."""
        if self.pulls is None:
            return await self.store(request)
        return await pull_endpoint(self.pulls, request)

    def routes(self) -> list[BaseRoute]:
        """The Starlette routes, each guarded so errors leave in Ollama's shape."""
        table: list[tuple[str, Endpoint, list[str]]] = [
            ("/", self.root, ["GET", "HEAD"]),
            ("/api/version", self.version, ["GET", "HEAD"]),
            ("/api/tags", self.tags, ["GET", "HEAD"]),
            ("/api/ps", self.ps, ["GET", "HEAD"]),
            ("/api/show", self.show, ["POST"]),
            ("/api/chat", self.chat, ["POST"]),
            ("/api/generate", self.generate, ["POST"]),
            ("/api/embed", self.embed, ["POST"]),
            ("/api/embeddings", self.embeddings_legacy, ["POST"]),
            ("/api/pull", self.pull, ["POST"]),
        ]
        routes: list[BaseRoute] = [
            Route(path, _guarded(fn), methods=methods) for path, fn, methods in table
        ]
        for name in _STORE_ROUTES:
            methods = ["GET", "HEAD", "POST", "PUT", "DELETE"]
            routes.append(Route(f"/api/{name}", _guarded(self.store), methods=methods))
        routes.append(Route("/api/blobs/{digest}", _guarded(self.store), methods=["HEAD", "POST"]))
        return routes


def ollama_routes(
    gateway: Gateway, client: httpx.AsyncClient, pulls: Pulls | None = None
) -> list[BaseRoute]:
    """Ollama's API over `gateway`; upstream requests go through `client`, which the caller
    owns (and gives no read timeout: generations may take long). `pulls` serves /api/pull."""
    return OllamaAPI(gateway, client, pulls).routes()
