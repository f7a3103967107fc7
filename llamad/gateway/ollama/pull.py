"""`POST /api/pull` as Ollama answers it: NDJSON progress (`status`, `digest`, `total`,
`completed`) ending in `{"status": "success"}` or `{"error": ...}`, or with
`"stream": false` one answer once the model is routable; and `DELETE /api/delete`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.responses import JSONResponse, Response, StreamingResponse

from llamad.gateway.access.call import Call
from llamad.gateway.models.downloads import downloading as pull_under_way
from llamad.gateway.ollama.errors import OllamaError, field, from_gateway
from llamad.library.progress import PullError
from llamad.library.pulls import Pull, Pulls
from llamad.library.refs import RefError
from llamad.library.remove import NoSuchModel, RemoveError


def start_pull(pulls: Pulls, ref: str) -> Pull:
    """The pull of `ref`; a bad name is a 400, pulls that cannot run a 503."""
    try:
        return pulls.start(ref)
    except RefError as exc:
        raise OllamaError(400, str(exc)) from None
    except PullError as exc:
        raise OllamaError(503, str(exc), retry_after=5) from None


async def ndjson(pull: Pull) -> AsyncIterator[bytes]:
    """The pull's lines, one JSON object each."""
    async for event in pull.follow():
        yield json.dumps(event).encode() + b"\n"


async def pull_endpoint(pulls: Pulls, call: Call) -> Response:
    """POST /api/pull {model | name, stream}."""
    pull = start_pull(pulls, call.model)
    if field(call.doc, "stream", bool, True):
        return StreamingResponse(ndjson(pull), media_type="application/x-ndjson")
    last: dict[str, object] = {}
    async for event in pull.follow():
        last = event
    if "error" in last:
        raise OllamaError(500, str(last["error"]))
    return JSONResponse({"status": "success"})


async def delete_endpoint(pulls: Pulls, name: str) -> Response:
    """DELETE /api/delete {model | name}: a model llamad pulled; 200 with no body, as
    Ollama answers, or Ollama's 404 for a model it does not have."""
    try:
        await pulls.remove(name)
    except NoSuchModel:
        raise OllamaError(404, f"model '{name}' not found") from None
    except RemoveError as exc:
        raise OllamaError(exc.status, str(exc)) from None
    return Response(status_code=200)


def downloading(pulls: Pulls | None, name: str) -> None:
    """Ollama's 503 `downloading`, with the progress so far, for a model still being
    pulled (asked once the name has matched no model)."""
    if (exc := pull_under_way(pulls, name)) is not None:
        raise from_gateway(exc)
