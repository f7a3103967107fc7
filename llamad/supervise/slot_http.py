"""The slot routes of a running llama-server: `GET /props`, `GET /slots`, and
`POST /slots/N?action=save|restore` with a bare file name in its save directory."""

from __future__ import annotations

import json
from typing import Any

from llamad.backends.local_http import Client
from llamad.backends.probes import server_url
from llamad.backends.spec import InstanceSpec

REQUEST_TIMEOUT_S = 60.0


async def get(client: Client, spec: InstanceSpec, path: str) -> Any:
    """The JSON `spec`'s server answers at `path`; raises ValueError on any other status."""
    reply = await client.request("GET", _url(spec, path), REQUEST_TIMEOUT_S, None, _auth(spec))
    if reply.status != 200:
        raise ValueError(f"GET {path}: HTTP {reply.status}")
    return json.loads(reply.body)


async def post(
    client: Client, spec: InstanceSpec, slot: int, action: str, name: str
) -> tuple[int, dict[str, Any]]:
    """`action` (save, restore) on slot `slot` with file `name`: the status and the
    answer's JSON object ({} when it is none)."""
    return await send(client, spec, f"/slots/{slot}?action={action}", {"filename": name})


async def send(
    client: Client, spec: InstanceSpec, path: str, doc: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """POST `doc` to `path`: the status and the answer's JSON object ({} when none)."""
    body = json.dumps(doc).encode()
    reply = await client.request("POST", _url(spec, path), REQUEST_TIMEOUT_S, body, _auth(spec))
    try:
        answer = json.loads(reply.body)
    except ValueError:
        answer = {}
    return reply.status, answer if isinstance(answer, dict) else {}


def error(status: int, body: dict[str, Any]) -> str:
    """An error answer in one line."""
    err = body.get("error")
    message = err.get("message") if isinstance(err, dict) else None
    return f"HTTP {status}" + (f": {message}" if message else "")


def _url(spec: InstanceSpec, path: str) -> str:
    return server_url(spec.probe_host, spec.port, path)


def _auth(spec: InstanceSpec) -> dict[str, str]:
    return {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
