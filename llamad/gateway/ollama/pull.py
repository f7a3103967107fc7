"""`POST /api/pull` as Ollama answers it: NDJSON progress (`status`, `digest`, `total`,
`completed`) ending in `{"status": "success"}` or `{"error": ...}`, or with
`"stream": false` one answer once the model is routable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llamad.gateway.ollama.errors import OllamaError, field, model_name, read_body
from llamad.library.progress import PullError
from llamad.library.pulls import Pull, Pulls
from llamad.library.refs import RefError


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


async def pull_endpoint(pulls: Pulls, request: Request) -> Response:
    """POST /api/pull {model | name, stream}."""
    body = await read_body(request)
    pull = start_pull(pulls, model_name(body))
    if field(body, "stream", bool, True):
        return StreamingResponse(ndjson(pull), media_type="application/x-ndjson")
    last: dict[str, object] = {}
    async for event in pull.follow():
        last = event
    if "error" in last:
        raise OllamaError(500, str(last["error"]))
    return JSONResponse({"status": "success"})


def downloading(pulls: Pulls | None, name: str) -> None:
    """503 `downloading` with the progress so far for a model still being pulled: never a
    load of half a file."""
    pull = pulls.downloading(name) if pulls is not None else None
    if pull is None:
        return
    last = pull.last or {}
    done, total = last.get("completed"), last.get("total")
    progress = f" ({done} of {total} bytes)" if total else ""
    raise OllamaError(503, f"model {name!r} is downloading{progress}; retry shortly", retry_after=5)
