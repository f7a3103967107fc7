"""The library on the control API: `GET /v1/library` (every model found, with its source,
size, quantisation, whether it is loaded, why not servable, and its chat template's line
from status), `POST /v1/library/pull` (NDJSON progress, as Ollama's /api/pull streams
it) and `DELETE /v1/library/NAME` (a model llamad pulled; NAME may hold `/`, as Hugging
Face names do)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llamad.api.errors import ControlError
from llamad.backends.registry import template_line
from llamad.library.progress import PullError
from llamad.library.pulls import Pull, Pulls
from llamad.library.refs import RefError
from llamad.library.remove import RemoveError
from llamad.lifecycle.states import State
from llamad.supervise.daemon_state import DaemonState

Endpoint = Callable[[Request], Awaitable[Response]]


def library_routes(state: DaemonState, pulls: Pulls) -> list[tuple[str, Endpoint, list[str]]]:
    """The library's control routes over the daemon's state and its pulls."""

    def loaded(instance: str | None) -> bool:
        inst = state.supervisor.instances.get(instance or "")
        return inst is not None and inst.record.state is State.RUNNING

    def template(instance: str | None) -> str | None:
        inst = state.supervisor.instances.get(instance or "")
        return template_line(inst.spec) if inst else None

    async def listing(request: Request) -> Response:
        lib = state.resolved.library
        if lib is None:
            return JSONResponse({"enabled": False, "models": [], "notes": [], "places": []})
        models = []
        for m in lib.models:
            entry = m.to_dict(loaded(lib.served.get(m.name)))
            entry["instance"] = lib.served.get(m.name)
            entry["port"] = lib.ports.get(m.name)
            entry["chat_template"] = template(lib.served.get(m.name))
            models.append(entry)
        places = [str(p) for p in lib.places]
        return JSONResponse(
            {"enabled": True, "models": models, "notes": list(lib.notes), "places": places}
        )

    async def pull(request: Request) -> Response:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise ControlError('the body must be JSON: {"model": NAME}') from None
        ref = body.get("model") if isinstance(body, dict) else None
        if not isinstance(ref, str) or not ref:
            raise ControlError('the body must name the model: {"model": NAME}')
        try:
            started = pulls.start(ref)
        except (RefError, PullError) as exc:
            raise ControlError(str(exc)) from None
        return StreamingResponse(_lines(started), media_type="application/x-ndjson")

    async def delete(request: Request) -> Response:
        try:
            return JSONResponse(await pulls.remove(request.path_params["name"]))
        except RemoveError as exc:
            refusal = ControlError(str(exc))
            refusal.status, refusal.code = exc.status, exc.code
            raise refusal from None

    return [
        ("/v1/library", listing, ["GET"]),
        ("/v1/library/pull", pull, ["POST"]),
        ("/v1/library/{name:path}", delete, ["DELETE"]),
    ]


async def _lines(pull: Pull) -> AsyncIterator[bytes]:
    async for event in pull.follow():
        yield json.dumps(event).encode() + b"\n"
