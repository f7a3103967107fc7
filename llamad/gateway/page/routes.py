"""`/ui` and what only the page asks for: one status document, the model actions, and an
instance's log tail. The page's own files are open (the page then asks for the key);
everything else needs the key, as the rest of the gateway does.

Actions are POSTs. On a gateway without keys they are refused unless it listens on
loopback only: the page must not hand the LAN a way to stop models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.common.hosts import is_loopback
from llamad.gateway.core import Gateway
from llamad.gateway.families import error_body
from llamad.gateway.keys import may_use
from llamad.gateway.page.status import status as status_doc
from llamad.gateway.port import GatewayError, UnknownModel

_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
LOG_LINES = 60
LOG_BYTES = 64 * 1024

Restart = Callable[[str], Awaitable[None]]
LogPath = Callable[[str], Path | None]


def _static(name: str) -> Response:
    files = resources.files("llamad.gateway.page") / "static"
    suffix = Path(name).suffix
    if "/" in name or suffix not in _TYPES or not (files / name).is_file():
        return Response("not found", 404)
    kind = f"{_TYPES[suffix]}; charset=utf-8"
    headers = {"cache-control": "no-cache", "x-content-type-options": "nosniff"}
    return Response((files / name).read_bytes(), media_type=kind, headers=headers)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(status, code, message), status_code=status)


def page_routes(gateway: Gateway, restart: Restart, log_path: LogPath) -> list[BaseRoute]:
    """The page's routes over `gateway`; `restart` restarts an instance through the
    supervisor (drained, as `llamactl restart`), `log_path` finds its log file."""

    async def index(request: Request) -> Response:
        return _static("index.html")

    async def static(request: Request) -> Response:
        return _static(request.path_params["name"])

    async def status(request: Request) -> Response:
        return JSONResponse(status_doc(gateway))

    async def action(request: Request) -> Response:
        name, verb = request.path_params["name"], request.path_params["verb"]
        if verb not in ("load", "unload", "restart"):
            return _error(404, "not_found", f"no action {verb!r}: load, unload or restart")
        cfg = gateway.settings()
        if not cfg.keys and not is_loopback(cfg.host):
            return _error(403, "forbidden", "page actions need a gateway key on this address")
        facts = gateway.router.find(name)
        if facts is None or not may_use(facts.name):
            return _error(404, "model_not_found", f"model {name!r} does not exist")
        try:
            if verb == "load":
                async with gateway.lease(facts.name):
                    pass
            elif verb == "unload":
                await gateway.unload(facts.name)
            else:
                await restart(facts.name)
        except GatewayError as exc:
            return _error(exc.status, exc.code, exc.message)
        return JSONResponse({"model": facts.name, "done": verb})

    async def logs(request: Request) -> Response:
        name = request.path_params["name"]
        facts = gateway.router.find(name)
        path = log_path(facts.name) if facts is not None and may_use(facts.name) else None
        if facts is None or path is None:
            return _error(404, "model_not_found", str(UnknownModel(name, [])))
        lines = await asyncio.to_thread(_tail, path)
        return JSONResponse({"model": facts.name, "lines": lines})

    return [
        Route("/ui", index, methods=["GET", "HEAD"]),
        Route("/ui/", index, methods=["GET", "HEAD"]),
        Route("/ui/static/{name}", static, methods=["GET", "HEAD"]),
        Route("/ui/api/status", status, methods=["GET"]),
        Route("/ui/api/models/{name}/logs", logs, methods=["GET"]),
        Route("/ui/api/models/{name}/{verb:str}", action, methods=["POST"]),
    ]


def _tail(path: Path) -> list[str]:
    """The last lines of an instance's log, as written (the log is redacted as written)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_BYTES))
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-LOG_LINES:]


class BrowserRoot:
    """`GET /` from a browser (it accepts text/html) goes to the page; Ollama's clients,
    which probe `/` for "Ollama is running", never ask for HTML and get that as before."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/" and scope["method"] == "GET":
            accept = dict(scope["headers"]).get(b"accept", b"")
            if b"text/html" in accept:
                await RedirectResponse("/ui", 302)(scope, receive, send)
                return
        await self.app(scope, receive, send)
