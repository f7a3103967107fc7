"""What the door hands a route: the request, its caller and what the door read of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from llamad.gateway.books.activity import Tally
from llamad.gateway.contract.caller import Caller


@dataclass(frozen=True, slots=True)
class Call:
    """One request as the door decided it. `send` carries the CORS headers an allowed
    origin gets; `body` is read (and `doc` parsed) only for routes that take one; `model`
    is the name the request asked for, "" when its route names none; `affinity` and
    `relayed` are what it tells the balancer (`hop.py`), for the lease it is passed to."""

    scope: Scope
    receive: Receive
    send: Send
    caller: Caller
    params: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    doc: Any = None
    model: str = ""
    tally: Tally | None = None  # routes with books: the request's record while it runs
    affinity: bool = True
    relayed: str | None = None  # the gateway that relayed it here: never relayed again

    @property
    def path(self) -> str:
        """The request's path."""
        return str(self.scope["path"])

    def query(self, name: str) -> str | None:
        """The query parameter `name` (its last value), or None."""
        return query(self.scope, name)


def query(scope: Scope, name: str) -> str | None:
    """The query parameter `name` of the request in `scope` (its last value), or None."""
    raw = scope.get("query_string", b"")
    return dict(parse_qsl(raw.decode("utf-8", "replace"))).get(name) if raw else None


def responds(endpoint: Callable[[Call], Awaitable[Response]]) -> Callable[[Call], Awaitable[None]]:
    """A route answered by a Starlette response that `endpoint` makes."""

    async def run(call: Call) -> None:
        response = await endpoint(call)
        await response(call.scope, call.receive, call.send)

    return run
