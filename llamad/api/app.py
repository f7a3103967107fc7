"""The control API: a Starlette app over a Controller, independent of the transport.

`serve_unix` (from llamad.uds) puts it on the control socket; the same app can be served
on TCP. Every error leaves as `{"error": {"code": ..., "message": ...}}`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import structlog
from starlette.applications import Starlette
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamad.api.auth import ROLE
from llamad.api.conditional import conditional_json
from llamad.api.errors import ControlError, error_response
from llamad.api.logstream import LogStream, tail_offset
from llamad.api.uds import SocketInUse, serve_unix
from llamad.common.long_streams import LongStreams

__all__ = ["Controller", "SocketInUse", "create_app", "serve_unix", "tail_offset"]

log = structlog.get_logger("llamad.control")

DEFAULT_LINES = 100
MAX_LINES = 1_000_000
MAX_WAIT_S = 3600


class Controller(Protocol):
    """What the daemon exposes to the control API."""

    def status(self) -> dict[str, Any]: ...
    def peer(self) -> dict[str, Any]: ...
    def instance(self, name: str) -> dict[str, Any]: ...
    async def start(self, name: str, wait: float | None = None) -> dict[str, Any]: ...
    async def stop(self, name: str, wait: float | None = None) -> dict[str, Any]: ...
    async def restart(self, name: str, wait: float | None = None) -> dict[str, Any]: ...
    async def reload(self) -> dict[str, Any]: ...
    def log_file(self, name: str) -> Path: ...
    async def metrics(self) -> bytes: ...


Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(endpoint: Endpoint) -> Endpoint:
    # Handled here rather than by Starlette's ServerErrorMiddleware, which re-raises after
    # answering and would print every refused command as a traceback.
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ControlError as exc:
            return error_response(exc.status, exc.code, exc.message)
        except Exception as exc:
            path, error = request.url.path, type(exc).__name__  # rate-limited per kind
            log.exception("control.request_failed", method=request.method, path=path, error=error)
            return error_response(500, "internal", "internal error in llamad; see its log")

    return wrapper


def _wait_seconds(raw: str | None) -> float | None:
    """`?wait=S`: how long a command may hold the request for its outcome."""
    if raw is None:
        return None
    try:
        wait = float(raw)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= MAX_WAIT_S:  # also refuses nan and inf
        raise ControlError(f"wait must be a number of seconds from 0 to {MAX_WAIT_S}, not {raw!r}")
    return wait


class InstanceName(PathConvertor):
    """A name, `/` allowed, that does not end in one of the instance routes' suffixes."""

    regex = "[^/].*?" + "".join(f"(?<!/{v})" for v in ("start", "stop", "restart", "logs"))


register_url_convertor("instance", InstanceName())


def create_app(
    controller: Controller,
    *,
    shutdown: asyncio.Event | None = None,
    extra_routes: Sequence[tuple[str, Endpoint, list[str]]] = (),
) -> Starlette:
    """The control API over `controller` and `extra_routes` (the library's); log followers
    end when `shutdown` is set, and the read token holds at most `LONG_STREAMS_PER_KEY`."""
    streams = LongStreams()

    async def status(request: Request) -> Response:
        return JSONResponse(controller.status())

    async def peer(request: Request) -> Response:
        return conditional_json(request, controller.peer())

    async def instance(request: Request) -> Response:
        return JSONResponse(controller.instance(request.path_params["name"]))

    def command(verb: str) -> Endpoint:
        async def run(request: Request) -> Response:
            method = getattr(controller, verb)
            wait = _wait_seconds(request.query_params.get("wait"))
            return JSONResponse(await method(request.path_params["name"], wait))

        return run

    async def reload(request: Request) -> Response:
        return JSONResponse(await controller.reload())

    async def logs(request: Request) -> Response:
        raw = request.query_params.get("lines", str(DEFAULT_LINES))
        # ASCII only: '²'.isdigit() is true, and int('²') raises.
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_LINES:
            raise ControlError(f"lines must be a whole number from 0 to {MAX_LINES}, not {raw!r}")
        follow = request.query_params.get("follow", "0").lower() in ("1", "true", "yes")
        path = controller.log_file(request.path_params["name"])
        # Only a follow is long-lived; the admin token and the socket are the operator's.
        held = streams if follow and request.scope.get(ROLE) == "read" else None
        return LogStream(path, int(raw), follow, shutdown, held)

    async def metrics(request: Request) -> Response:
        body = await controller.metrics()
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(
            exc.status_code, codes.get(exc.status_code, "bad_request"), exc.detail
        )

    # A name may hold `/` (a Hugging Face model's, `user/repo:Q4_K_M`), sent as %2F or as
    # is: `:path` takes it whole; the bare route's `:instance` leaves a command's suffix to
    # its own route (GET .../start is a 405, not an instance named "NAME/start").
    routes = [
        Route("/v1/status", _guarded(status), methods=["GET"]),
        Route("/v1/fleet", _guarded(peer), methods=["GET"]),
        Route("/v1/instances/{name:path}/logs", _guarded(logs), methods=["GET"]),
        Route("/v1/reload", _guarded(reload), methods=["POST"]),
        Route("/metrics", _guarded(metrics), methods=["GET"]),
    ]
    for verb in ("start", "stop", "restart"):
        path = f"/v1/instances/{{name:path}}/{verb}"
        routes.append(Route(path, _guarded(command(verb)), methods=["POST"]))
    routes.append(Route("/v1/instances/{name:instance}", _guarded(instance), methods=["GET"]))
    routes += [Route(path, _guarded(fn), methods=methods) for path, fn, methods in extra_routes]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})
