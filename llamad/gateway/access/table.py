"""Every route of the gateway in one table, each with what the door must decide first.

`Need` says who may call a route: anyone (the probes and the page's own files), any
valid key (listings, activity, the events stream: each shows a caller only its models),
a key that may use the model the request names (relayed requests, the fleet hop, the
Ollama routes that load or unload, a model's page and log), a page action (the same, and
without keys only on loopback), or library management (pull, delete, the Ollama store:
never a key limited to some models). A body-routed POST is found by one dict lookup.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from llamad.gateway.access.call import Call
from llamad.gateway.books.activity import Tally


class Need(Enum):
    """Who may call a route."""

    OPEN = "open"  # no key; only the route's own methods
    KEY = "key"  # any valid key
    MODEL = "model"  # a key that may use the model the request names
    ACTION = "action"  # a page action: as MODEL, and without keys only on loopback
    MANAGE = "manage"  # the library: a key limited to some models never


class Body(Enum):
    """What the door reads of a route's body before the route runs."""

    NONE = "none"  # nothing: the route reads no body
    RAW = "raw"  # all of it, passed on as it came (`/upstream/...`)
    JSON = "json"  # all of it, UTF-8 JSON or a 400


class Books(Protocol):
    """Who records a route's requests (activity, metrics) once they end."""

    def close(self, tally: Tally, model: str, label: str) -> None: ...


Handler = Callable[[Call], Awaitable[None]]


@dataclass(frozen=True)
class Route:
    """One path (Starlette's `{name}` and `{name:path}` parameters) and its methods
    (None: every method; GET brings HEAD), what it needs, and where its model is named:
    "body", "query" (`?model=`) or a path parameter's name."""

    path: str
    methods: tuple[str, ...] | None
    need: Need
    handler: Handler
    body: Body = Body.NONE
    model: str | None = None
    books: Books | None = None  # routes that lease a model: the door starts their tally
    long: bool = False  # a stream held as long as its client likes: capped per limited key


_PARAM = re.compile(r"{(\w+)(?::(\w+))?}")


def _pattern(path: str) -> re.Pattern[str]:
    out, at = [], 0
    for m in _PARAM.finditer(path):
        out.append(re.escape(path[at : m.start()]))
        out.append(f"(?P<{m[1]}>.*)" if m[2] == "path" else f"(?P<{m[1]}>[^/]+)")
        at = m.end()
    return re.compile("".join(out) + re.escape(path[at:]))


def _methods(route: Route) -> frozenset[str] | None:
    if route.methods is None:
        return None
    methods = set(route.methods)
    if "GET" in methods:
        methods.add("HEAD")
    return frozenset(methods)


class Table:
    """The routes, found by method and path; two routes for one method and path are a
    mistake, refused when the table is made."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = list(routes)
        self._exact: dict[tuple[str, str], Route] = {}
        self._paths: set[str] = set()
        self._patterns: list[tuple[re.Pattern[str], frozenset[str] | None, Route]] = []
        for route in self.routes:
            methods = _methods(route)
            if _PARAM.search(route.path) or methods is None:
                self._patterns.append((_pattern(route.path), methods, route))
                continue
            self._paths.add(route.path)
            for method in methods:
                if (method, route.path) in self._exact:
                    raise ValueError(f"two routes for {method} {route.path}")
                self._exact[method, route.path] = route

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]] | int:
        """The route and its path parameters, or 404 (no such path) or 405 (not by
        this method)."""
        route = self._exact.get((method, path))
        if route is not None:
            return route, {}
        status = 405 if path in self._paths else 404
        for pattern, methods, route in self._patterns:
            if (found := pattern.fullmatch(path)) is not None:
                if methods is None or method in methods:
                    return route, found.groupdict()
                status = 405
        return status

    def allowed(self, path: str) -> list[str]:
        """The methods some route takes at `path` (the `Allow` of a 405)."""
        out: set[str] = set()
        for route in self.routes:
            methods = _methods(route)
            if methods is not None and _pattern(route.path).fullmatch(path):
                out |= methods
        return sorted(out)
