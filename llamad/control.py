"""The control API: a Starlette app over a Controller, independent of the transport.

`serve_unix` (from llamad.uds) puts it on the control socket; the same app can be served
on TCP. Every error leaves as `{"error": {"code": ..., "message": ...}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from llamad.errors import ControlError
from llamad.uds import SocketInUse, serve_unix

__all__ = ["Controller", "SocketInUse", "create_app", "serve_unix"]

log = logging.getLogger("llamad.control")

POLL_S = 0.2
DEFAULT_LINES = 100
MAX_LINES = 1_000_000
_CHUNK = 64 * 1024


class Controller(Protocol):
    """What the daemon exposes to the control API."""

    def status(self) -> dict[str, Any]: ...
    def instance(self, name: str) -> dict[str, Any]: ...
    async def start(self, name: str) -> dict[str, Any]: ...
    async def stop(self, name: str) -> dict[str, Any]: ...
    async def restart(self, name: str) -> dict[str, Any]: ...
    async def reload(self) -> dict[str, Any]: ...
    def log_file(self, name: str) -> Path: ...
    async def metrics(self) -> bytes: ...


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(endpoint: Endpoint) -> Endpoint:
    # Handled here rather than by Starlette's ServerErrorMiddleware, which re-raises after
    # answering and would print every refused command as a traceback.
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ControlError as exc:
            return _error(exc.status, exc.code, exc.message)
        except Exception:
            log.exception("control API: %s %s failed", request.method, request.url.path)
            return _error(500, "internal", "internal error in llamad; see its log")

    return wrapper


def create_app(controller: Controller, *, shutdown: asyncio.Event | None = None) -> Starlette:
    """The control API over `controller`; log followers end when `shutdown` is set."""

    async def status(request: Request) -> Response:
        return JSONResponse(controller.status())

    async def instance(request: Request) -> Response:
        return JSONResponse(controller.instance(request.path_params["name"]))

    def command(verb: str) -> Endpoint:
        async def run(request: Request) -> Response:
            method = getattr(controller, verb)
            return JSONResponse(await method(request.path_params["name"]))

        return run

    async def reload(request: Request) -> Response:
        return JSONResponse(await controller.reload())

    async def logs(request: Request) -> Response:
        raw = request.query_params.get("lines", str(DEFAULT_LINES))
        if not raw.isdigit() or int(raw) > MAX_LINES:
            raise ControlError(f"lines must be a whole number from 0 to {MAX_LINES}, not {raw!r}")
        follow = request.query_params.get("follow", "0").lower() in ("1", "true", "yes")
        path = controller.log_file(request.path_params["name"])
        return LogStream(path, int(raw), follow, shutdown)

    async def metrics(request: Request) -> Response:
        body = await controller.metrics()
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "bad_request"), exc.detail)

    routes = [
        Route("/v1/status", _guarded(status), methods=["GET"]),
        Route("/v1/instances/{name}", _guarded(instance), methods=["GET"]),
        Route("/v1/instances/{name}/logs", _guarded(logs), methods=["GET"]),
        Route("/v1/reload", _guarded(reload), methods=["POST"]),
        Route("/metrics", _guarded(metrics), methods=["GET"]),
    ]
    for verb in ("start", "stop", "restart"):
        path = f"/v1/instances/{{name}}/{verb}"
        routes.append(Route(path, _guarded(command(verb)), methods=["POST"]))
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


def tail_offset(fh: IO[bytes], lines: int) -> int:
    """Where the last `lines` lines of `fh` begin, reading backwards one block at a time."""
    end = fh.seek(0, os.SEEK_END)
    if lines == 0:
        return end
    pos, wanted = end, lines
    fh.seek(end - 1 if end else 0)
    if end and fh.read(1) == b"\n":
        wanted += 1  # the file's final newline ends the last line rather than starting one
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        fh.seek(pos)
        block = fh.read(step)
        count = block.count(b"\n")
        if count >= wanted:
            cut = len(block)
            for _ in range(wanted):
                cut = block.rindex(b"\n", 0, cut)
            return pos + cut + 1
        wanted -= count
    return 0


class LogStream(Response):
    """text/plain: the last N lines of a log, then (if following) what gets appended.

    Follows by polling, which works the same on every OS; a rotation (new inode) or a
    truncation (the file shrank) is read from its start.
    """

    def __init__(
        self, path: Path, lines: int, follow: bool, shutdown: asyncio.Event | None
    ) -> None:
        super().__init__(media_type="text/plain; charset=utf-8")
        self.path, self.lines, self.follow, self.shutdown = path, lines, follow, shutdown
        del self.headers["content-length"]  # streamed: chunked transfer encoding

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()

        async def until_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            stop.set()

        async def until_shutdown() -> None:
            if self.shutdown is not None:
                await self.shutdown.wait()
                stop.set()

        try:
            fh = self._open()
        except OSError as exc:  # e.g. permissions: say so rather than send an empty log
            message = f"cannot read {self.path}: {exc.strerror}"
            await _error(500, "internal", message)(scope, receive, send)
            return
        watchers = [asyncio.create_task(until_disconnect()), asyncio.create_task(until_shutdown())]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            if fh is not None:
                fh.seek(tail_offset(fh, self.lines))
                await self._drain(fh, send)
            while self.follow and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await stop.wait()
                fh = await self._follow_step(fh, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away mid-send (ASGI 2.4 servers raise instead of telling us)
        finally:
            for task in watchers:
                task.cancel()
            if fh is not None:
                fh.close()

    def _open(self) -> IO[bytes] | None:
        try:
            return self.path.open("rb")
        except FileNotFoundError:
            return None

    async def _drain(self, fh: IO[bytes], send: Send) -> None:
        while chunk := fh.read(_CHUNK):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def _follow_step(self, fh: IO[bytes] | None, send: Send) -> IO[bytes] | None:
        if fh is not None:
            await self._drain(fh, send)  # the rest of the old file, rotated or not
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return fh  # rotated away and not recreated yet
        if fh is None:
            fh = self._open()
        elif os.fstat(fh.fileno()).st_ino != st.st_ino:
            fh.close()
            fh = self._open()
        elif st.st_size < fh.tell():
            fh.seek(0)
        if fh is not None:
            await self._drain(fh, send)
        return fh
