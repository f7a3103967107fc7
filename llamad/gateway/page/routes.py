"""`/ui` and what only the page asks for: one status document, the model actions, and an
instance's log tail. The page's own files are open (the page then asks for the key);
everything else needs the key, as the rest of the gateway does.

Actions are POSTs. On a gateway without keys the door refuses them unless it listens on
loopback only: the page must not hand the LAN a way to stop models. A key limited to
some models acts on those only (the door answers others as models that do not exist).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from importlib import resources
from pathlib import Path

from starlette.responses import JSONResponse, RedirectResponse, Response

from llamad.gateway.access.call import Call, responds
from llamad.gateway.access.scope import visible
from llamad.gateway.access.table import Handler, Need, Route
from llamad.gateway.contract.families import error_body
from llamad.gateway.contract.port import GatewayError, UnknownModel
from llamad.gateway.core import Gateway
from llamad.gateway.page.status import CacheOf, no_cache
from llamad.gateway.page.status import status as status_doc

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


def page_routes(
    gateway: Gateway, restart: Restart, log_path: LogPath, cache_of: CacheOf = no_cache
) -> list[Route]:
    """The page's routes over `gateway`; `restart` restarts an instance through the
    supervisor (drained, as `llamactl restart`), `log_path` finds its log file,
    `cache_of` says what its prompt cache holds and did. The door has decided the caller
    may use the model an action or a log names."""

    async def index(call: Call) -> Response:
        return _static("index.html")

    async def static(call: Call) -> Response:
        return _static(call.params["name"])

    async def status(call: Call) -> Response:
        return JSONResponse(status_doc(gateway, call.caller, cache_of))

    async def action(call: Call) -> Response:
        name, verb = call.model, call.params["verb"]
        if verb not in ("load", "unload", "restart"):
            return _error(404, "not_found", f"no action {verb!r}: load, unload or restart")
        facts = gateway.router.find(name)
        if facts is None:
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

    async def logs(call: Call) -> Response:
        facts = gateway.router.find(call.model)
        path = log_path(facts.name) if facts is not None else None
        if facts is None or path is None:
            message = UnknownModel(call.model, visible(gateway, call.caller)).message
            return _error(404, "model_not_found", message)
        lines = await asyncio.to_thread(_tail, path)
        return JSONResponse({"model": facts.name, "lines": lines})

    page, open_ = ("GET", "HEAD"), Need.OPEN
    return [
        Route("/ui", page, open_, responds(index)),
        Route("/ui/", page, open_, responds(index)),
        Route("/ui/static/{name}", page, open_, responds(static)),
        Route("/ui/api/status", ("GET",), Need.KEY, responds(status)),
        Route("/ui/api/models/{name}/logs", ("GET",), Need.MODEL, responds(logs), model="name"),
        Route(
            "/ui/api/models/{name}/{verb}", ("POST",), Need.ACTION, responds(action), model="name"
        ),
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


def for_browsers(routes: list[Route]) -> list[Route]:
    """`routes` with `GET /` sending a browser (it accepts text/html) to the page;
    Ollama's clients, which probe `/` for "Ollama is running", never ask for HTML and
    get that as before."""
    return [replace(r, handler=_to_page(r.handler)) if r.path == "/" else r for r in routes]


def _to_page(handler: Handler) -> Handler:
    async def root(call: Call) -> None:
        if call.scope["method"] == "GET":
            accept = dict(call.scope["headers"]).get(b"accept", b"")
            if b"text/html" in accept:
                await RedirectResponse("/ui", 302)(call.scope, call.receive, call.send)
                return
        await handler(call)

    return root
