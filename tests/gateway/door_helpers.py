"""The gateway's whole app, in process, over a supervisor double: every route the daemon
serves (the door's table, with the Ollama facade, the page and activity), and one
request at a time sent to it as ASGI, with what each collaborator was asked to do."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from supervisor_double import Double, spec

from llamad.config.gateway_keys import NamedKey
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.access.door import Door
from llamad.gateway.app import build_app
from llamad.gateway.core import Gateway
from llamad.gateway.events_stream import activity_routes
from llamad.gateway.ollama import ollama_routes
from llamad.gateway.page import for_browsers, page_routes
from llamad.lifecycle.states import State
from llamad.upstream.pool import Pool

PORT = 8080
HOST = f"127.0.0.1:{PORT}"
MAIN, ALICE = "main-secret-0123456789", "alice-secret-0123456789"
KEYS = (NamedKey("default", MAIN), NamedKey("alice", ALICE, frozenset({"a"})))


class Pulls:
    """Stands in for the library's pulls: records every pull and removal asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def start(self, ref: str) -> Any:
        self.asked.append(("pull", ref))
        raise RuntimeError("a test double pulls nothing")

    async def remove(self, name: str) -> dict[str, Any]:
        self.asked.append(("remove", name))
        return {}

    def downloading(self, name: str) -> None:
        return None


@dataclass
class App:
    """The app and what it asked of its collaborators."""

    door: Door
    gateway: Gateway
    double: Double
    pulls: Pulls
    restarts: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def stops(self) -> list[str]:
        """The instances the gateway told to stop."""
        return [name for name, what, _ in self.double.commands if what.startswith("Stop")]


def build(tmp_path: Path, keys: tuple[NamedKey, ...] = KEYS, **settings: Any) -> App:
    """Instances `a` (alias `a2`) and `b`, both running on demand, behind the door."""
    double = Double()
    for name, aliases in (("a", ("a2",)), ("b", ())):
        double.add(replace(spec(name), aliases=aliases), State.RUNNING)
    cfg = GatewayConfig(
        **{"host": "127.0.0.1", "port": PORT, "keys": keys, "memory_budget": None, **settings}
    )
    gateway = Gateway(double, lambda: cfg)
    pulls = Pulls()
    log = tmp_path / "a.log"
    log.write_text("a line of a's log\n")
    restarts: list[str] = []

    async def restart(name: str) -> None:
        restarts.append(name)

    stop = asyncio.Event()
    pool = Pool()
    extra = [
        *activity_routes(gateway, stop),
        *page_routes(gateway, restart, lambda name: log),
        *ollama_routes(gateway, pool, pulls, activity=gateway.activity),  # type: ignore[arg-type]
    ]
    door = build_app(gateway, for_browsers(extra), pool=pool)
    return App(door, gateway, double, pulls, restarts, stop)


@dataclass
class Answer:
    status: int
    headers: dict[bytes, bytes]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def error(self) -> str:
        """The error's message, in any family's shape."""
        doc = self.json()["error"]
        return doc if isinstance(doc, str) else str(doc["message"])


async def ask(
    app: Door,
    method: str,
    path: str,
    body: bytes | dict[str, Any] = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    key: str | None = None,
    client: str = "127.0.0.1",
    timeout: float = 5.0,
    extra: dict[str, Any] | None = None,
) -> Answer:
    """One request (with `Host: 127.0.0.1:8080` unless `headers` has one), answered;
    `extra`: more of the scope (what a listener adds)."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    given = list(headers or [])
    if not any(k == b"host" for k, _ in given):
        given.append((b"host", HOST.encode()))
    if key is not None:
        given.append((b"authorization", f"Bearer {key}".encode()))
    path, _, query = path.partition("?")
    scope = {
        "type": "http", "method": method, "path": path, "raw_path": path.encode(),
        "root_path": "", "query_string": query.encode(), "headers": given,
        "client": (client, 50000), "server": ("127.0.0.1", PORT),
        "http_version": "1.1", "scheme": "http", **(extra or {}),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []
    done = asyncio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    async with asyncio.timeout(timeout):
        await app(scope, receive, send)
    start = sent[0]
    return Answer(
        start["status"],
        dict(start.get("headers", [])),
        b"".join(m.get("body", b"") for m in sent[1:]),
    )
