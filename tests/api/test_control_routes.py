"""Every route of the control API is decided in one place per listener: on TCP by
`BearerAuth` (no token 401, the read token GET and HEAD only), on the Unix socket by the
peer's uid. The tests walk the app's own routes, the library's included, so a route
added later is checked the day it is added."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from test_control import FakeController, short_dir, start_server  # noqa: F401 (a fixture)

from llamad.api.app import create_app
from llamad.api.auth import BearerAuth, RateLimiter
from llamad.api.library import library_routes
from llamad.client.http import Unreachable

pytestmark = pytest.mark.timeout(30)

ADMIN, READ = "admin-token-0123456789", "read-token-0123456789"
READS = {"GET", "HEAD"}


def app_routes(log_dir: Path) -> tuple[FakeController, list[tuple[str, str]]]:
    """The control app as the daemon makes it, and (method, path) for each of its
    routes and methods, parameters filled in."""
    ctl = FakeController(log_dir)
    # The library's routes take the daemon's state and pulls only when they run.
    app = create_app(ctl, extra_routes=library_routes(None, None))  # type: ignore[arg-type]
    found = []
    for route in app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"{(\w+)(?::\w+)?}", "qwen", route.path)
        found += [(method, path) for method in sorted(route.methods or ())]
    assert len(found) >= 12
    return ctl, found


class Reached:
    """Stands for the app behind the check: records what got through."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.seen.append((scope["method"], scope["path"]))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://llamad")


async def test_tcp_every_route_needs_a_token_and_the_read_token_only_reads(
    tmp_path: Path,
) -> None:
    ctl, routes = app_routes(tmp_path)
    real = create_app(ctl)
    # Every route refused in turn: more failures than one address may have in a window.
    many = RateLimiter(max_failures=10_000)
    async with client(BearerAuth(real, ADMIN, READ, many)) as http:
        for method, path in routes:
            refused = await http.request(method, path)
            assert refused.status_code == 401, (method, path)
            if method not in READS:
                headers = {"Authorization": f"Bearer {READ}"}
                write = await http.request(method, path, headers=headers)
                assert write.status_code == 403, (method, path)
    assert ctl.calls == []  # nothing was started, stopped or restarted

    behind = Reached()
    async with client(BearerAuth(behind, ADMIN, READ)) as http:
        for method, path in routes:
            for token in (ADMIN, READ):
                if token == READ and method not in READS:
                    continue
                # The scheme in any case (RFC 7235), as the gateway takes it too.
                scheme = "bearer" if token == READ else "BEARER"
                headers = {"Authorization": f"{scheme} {token}"}
                assert (await http.request(method, path, headers=headers)).status_code == 204
    expected = [(m, p) for m, p in routes] + [(m, p) for m, p in routes if m in READS]
    assert sorted(behind.seen) == sorted(expected)


async def test_unix_socket_every_route_is_refused_to_another_uid(short_dir: Path) -> None:  # noqa: F811
    ctl, routes = app_routes(short_dir)
    server = await start_server(short_dir / "s.sock", ctl, allowed_uid=12345)
    try:
        for method, path in routes:
            with pytest.raises(Unreachable, match="connection closed"):
                await server.request(method, path)
    finally:
        await server.stop()
    assert ctl.calls == []
