"""Every route of the gateway is decided by the door: the tests walk the door's table
(every route, every method it takes), so a route added later is checked the day it is
added. In process, over a supervisor double: nothing may be started, stopped, pulled,
deleted or restarted by a request the door refuses."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from door_helpers import ALICE, MAIN, App, ask, build
from starlette.responses import Response
from supervisor_double import until

from llamad.common.long_streams import LONG_STREAMS_PER_KEY
from llamad.gateway.access.call import Call, responds
from llamad.gateway.access.door import Door
from llamad.gateway.access.limits import GatewayLimits
from llamad.gateway.access.table import Body, Need, Route, Table
from llamad.gateway.books.activity import Tally
from llamad.listener.table import TRUST

pytestmark = pytest.mark.timeout(60)

# The only routes that answer without a key: the probes, the page's own files.
OPEN = {"/health", "/ready", "/", "/api/version", "/ui", "/ui/", "/ui/static/{name}"}
# What each listing a key limited to `a` may read must not name: `b`.
OUTSIDE = "b"
# Enough for every route that reads a body: a chat, a generation, an unload by
# keep_alive 0, a pull or a delete, all of `b`.
BODY = {"model": OUTSIDE, "messages": [], "prompt": "", "keep_alive": 0, "input": "x"}


_OURS = b"http://127.0.0.1:8080"  # the gateway's own origin: the page's


def methods(route: Route) -> list[str]:
    """Every method `route` takes (for a route of any method, the usual ones)."""
    listed = list(route.methods or ("GET", "POST", "PUT", "DELETE"))
    return [*listed, "HEAD"] if "GET" in listed and "HEAD" not in listed else listed


def concrete(route: Route) -> str:
    """`route`'s path with its parameters filled in: its model is `b`."""

    def fill(m: re.Match[str]) -> str:
        name = m[1]
        if name == route.model:
            return OUTSIDE
        return {"verb": "unload", "path": "props"}.get(name, "x")

    path = re.sub(r"{(\w+)(?::\w+)?}", fill, route.path)
    return path + "?model=b" if route.model == "query" else path


def every(app: App) -> list[tuple[Route, str, str]]:
    """(route, method, path) for every route of the app and every method it takes."""
    return [(r, m, concrete(r)) for r in app.door.table.routes for m in methods(r)]


async def send(app: App, method: str, path: str, **kw: Any) -> Any:
    app.stop.set()  # the events stream ends after its first chunk
    return await ask(app.door, method, path, BODY, **kw)


def nothing_done(app: App) -> None:
    assert app.double.commands == []  # no start, no stop
    assert app.pulls.asked == []  # nothing pulled or deleted
    assert app.restarts == []


def test_the_open_routes_are_the_probes_and_the_pages_files(tmp_path: Path) -> None:
    app = build(tmp_path)
    opened = {r.path for r in app.door.table.routes if r.need is Need.OPEN}
    assert opened == OPEN
    for route in app.door.table.routes:
        if route.need is Need.OPEN:
            assert set(methods(route)) <= {"GET", "HEAD"}, route.path
        if route.model is not None:  # a route that names a model decides who may use it
            assert route.need in (Need.MODEL, Need.ACTION, Need.MANAGE), route.path


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([(b"host", b"evil.test:8080")], "Host is not served"),
        ([(b"origin", b"http://evil.test")], "origin is not allowed"),
        # A browser sends one Origin: two are a forger's, whichever the CORS check took.
        ([(b"origin", b"http://evil.test"), (b"origin", _OURS)], "one Origin"),
        ([(b"origin", _OURS), (b"origin", _OURS)], "one Origin"),
    ],
    ids=[
        "foreign host",
        "origin",
        "two origins, the last ours",
        "two origins, both ours",
    ],
)
async def test_a_foreign_host_or_origin_is_refused_on_every_route(
    tmp_path: Path, headers: list[tuple[bytes, bytes]], why: str
) -> None:
    app = build(tmp_path)
    for _route, method, path in every(app):
        answer = await send(app, method, path, headers=headers, key=MAIN)
        assert answer.status == 403, (method, path, answer.body)
        assert why in answer.error(), (method, path)
    nothing_done(app)


async def test_every_route_but_the_open_ones_needs_a_valid_key(tmp_path: Path) -> None:
    app = build(tmp_path)
    for n, (route, method, path) in enumerate(every(app)):
        if route.need is Need.OPEN:
            continue
        # Each from an address of its own: wrong keys from one address are held at 10.
        client = f"10.0.{n // 200}.{n % 200 + 1}"
        for key in (None, "wrong-key-0123456789"):
            answer = await send(app, method, path, key=key, client=client)
            assert answer.status == 401, (method, path, key, answer.body)
            assert "a valid API key is required" in answer.error()
    nothing_done(app)


async def test_the_open_routes_answer_without_a_key(tmp_path: Path) -> None:
    app = build(tmp_path)
    for route, method, path in every(app):
        if route.need is Need.OPEN:
            answer = await send(app, method, path)
            assert answer.status in (200, 404), (method, path)  # 404: no such page file


async def test_a_limited_key_can_reach_nothing_outside_its_models(tmp_path: Path) -> None:
    """Alice may use `a` only: a route naming `b` answers as for a model that does not
    exist, the library is not hers to change, and no listing names `b`."""
    app = build(tmp_path)
    for route, method, path in every(app):
        answer = await send(app, method, path, key=ALICE)
        if route.need in (Need.MODEL, Need.ACTION):
            assert answer.status == 404, (method, path, answer.body)
        elif route.need is Need.MANAGE:
            assert answer.status == 403, (method, path, answer.body)
            assert "may not change the library" in answer.error()
        elif route.need is Need.KEY:
            assert answer.status == 200, (method, path, answer.body)
        assert not re.search(rb'"(b|b:latest)"', answer.body), (method, path, answer.body)
    nothing_done(app)


async def test_the_same_calls_by_an_unlimited_key_do_reach_the_routes(tmp_path: Path) -> None:
    """The refusals above are the key's: the main key's same requests unload, pull and
    delete."""
    app = build(tmp_path)
    for route, method, path in every(app):
        if route.need is Need.MANAGE or path in ("/api/generate", "/api/chat"):
            await send(app, method, path, key=MAIN)
    assert ("remove", "b") in app.pulls.asked
    assert ("pull", "b") in app.pulls.asked
    assert "b" in app.stops()


async def test_every_json_route_refuses_a_body_that_is_not_utf8(tmp_path: Path) -> None:
    """UTF-16 with a BOM, which `json.loads(bytes)` takes: a 400 in the family's shape,
    decided at the door before any route runs."""
    app = build(tmp_path)
    body = '{"model": "a", "messages": [], "prompt": "hi"}'.encode("utf-16")
    routes = [r for r in app.door.table.routes if r.body is Body.JSON]
    assert {"/v1/chat/completions", "/api/chat", "/api/pull", "/api/delete"} <= {
        r.path for r in routes
    }
    for route in routes:
        for method in methods(route):
            answer = await ask(app.door, method, route.path, body, key=MAIN)
            assert answer.status == 400, (route.path, answer.body)
            assert "not UTF-8 JSON" in answer.error(), route.path
    nothing_done(app)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_every_json_route_refuses_nan_and_infinity(tmp_path: Path, constant: str) -> None:
    """Python's parser takes them, JSON and llama-server do not (its 500): a 400 in the
    family's shape, at the door."""
    app = build(tmp_path)
    body = f'{{"model": "a", "messages": [], "prompt": "hi", "temperature": {constant}}}'
    for route in (r for r in app.door.table.routes if r.body is Body.JSON):
        for method in methods(route):
            answer = await ask(app.door, method, route.path, body.encode(), key=MAIN)
            assert answer.status == 400, (route.path, answer.body)
            assert f"{constant} is no JSON value" in answer.error(), route.path
    nothing_done(app)


async def test_a_limited_key_unloads_only_its_own_models(tmp_path: Path) -> None:
    """F2: keep_alive 0 with no prompt unloads; alice may for `a`, never for `b`."""
    app = build(tmp_path)
    for path, empty in (("/api/generate", "prompt"), ("/api/chat", "messages")):
        body = {"model": "b", empty: [] if empty == "messages" else "", "keep_alive": 0}
        refused = await ask(app.door, "POST", path, body, key=ALICE)
        assert (refused.status, refused.json()) == (404, {"error": 'model "b" not found'})
    assert app.stops() == []
    done = await ask(app.door, "POST", "/api/generate", {"model": "a2", "keep_alive": 0}, key=ALICE)
    assert done.status == 200
    assert done.json()["done_reason"] == "unload"
    assert app.stops() == ["a"]


async def test_a_model_outside_the_keys_list_is_a_model_that_does_not_exist(
    tmp_path: Path,
) -> None:
    """F6: the same answer for `b` as for `nope`, and the list in it names alice's own."""
    app = build(tmp_path)
    for method, path, body in (
        ("POST", "/v1/chat/completions", {"model": "{}"}),
        ("POST", "/v1/messages", {"model": "{}"}),
        ("GET", "/v1/models/{}", b""),
        ("GET", "/props?model={}", b""),
        ("POST", "/api/show", {"model": "{}"}),
        ("POST", "/api/chat", {"model": "{}", "messages": [{"role": "user", "content": "x"}]}),
        ("POST", "/ui/api/models/{}/load", b""),
        ("GET", "/ui/api/models/{}/logs", b""),
    ):
        seen = []
        for name in ("b", "nope"):
            doc = {**body, "model": name} if isinstance(body, dict) else body
            answer = await ask(app.door, method, path.format(name), doc, key=ALICE)
            assert answer.status == 404, (path, answer.body)
            seen.append(re.sub(rf"(['\"]){name}\1", "NAME", answer.error()))
        assert seen[0] == seen[1], path
        assert not re.search(r"\bb\b", seen[0]), seen[0]
    listed = await ask(app.door, "POST", "/v1/chat/completions", {"model": "nope"}, key=ALICE)
    assert listed.error().endswith("available: a, a2")
    main = await ask(app.door, "POST", "/v1/chat/completions", {"model": "nope"}, key=MAIN)
    assert main.error().endswith("available: a, a2, b")
    nothing_done(app)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_the_bearer_scheme_in_any_case(tmp_path: Path, scheme: str) -> None:
    """RFC 7235: the scheme is case-insensitive; the key itself is not."""
    app = build(tmp_path)
    auth = [(b"authorization", f"{scheme} {MAIN}".encode())]
    assert (await ask(app.door, "GET", "/v1/models", headers=auth)).status == 200
    wrong = [(b"authorization", f"{scheme} {MAIN.upper()}".encode())]
    assert (await ask(app.door, "GET", "/v1/models", headers=wrong)).status == 401


async def test_an_allowed_origin_gets_cors_on_refusals_too(tmp_path: Path) -> None:
    """The page on an allowed origin reads why it was refused."""
    app = build(tmp_path, allowed_origins=frozenset({"http://ui.test:3000"}))
    origin = [(b"origin", b"http://ui.test:3000")]
    refused = await ask(app.door, "GET", "/v1/models", headers=origin)
    assert refused.status == 401
    assert refused.headers[b"access-control-allow-origin"] == b"http://ui.test:3000"
    preflight = await ask(
        app.door, "OPTIONS", "/v1/chat/completions",
        headers=[*origin, (b"access-control-request-method", b"POST")],
    )  # fmt: skip
    assert preflight.status == 204


async def test_a_client_gone_before_its_body_costs_nothing(tmp_path: Path) -> None:
    app = build(tmp_path)
    scope = {
        "type": "http", "method": "POST", "path": "/api/chat", "query_string": b"",
        "headers": [(b"authorization", f"Bearer {MAIN}".encode())],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080),
    }  # fmt: skip
    sent: list[object] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def record(message: object) -> None:
        sent.append(message)

    async with asyncio.timeout(5):
        await app.door(scope, receive, record)
    assert sent == []
    nothing_done(app)


async def test_the_pages_actions_for_a_key_that_may(tmp_path: Path) -> None:
    """The page's load, unload, restart and log, by the main key and by alice on `a`."""
    app = build(tmp_path)
    for key in (MAIN, ALICE):
        for verb in ("unload", "load", "restart"):
            done = await ask(app.door, "POST", f"/ui/api/models/a/{verb}", key=key)
            assert (done.status, done.json()) == (200, {"model": "a", "done": verb})
        logs = await ask(app.door, "GET", "/ui/api/models/a/logs", key=key)
        assert logs.json() == {"model": "a", "lines": ["a line of a's log"]}
    assert app.restarts == ["a", "a"]
    assert app.stops() == ["a", "a"]


async def test_page_actions_need_a_key_off_loopback(tmp_path: Path) -> None:
    """Without keys, the page must not hand the LAN a way to stop models."""
    app = build(tmp_path, keys=(), host="0.0.0.0", allowed_hosts=frozenset({"*"}))
    refused = await ask(app.door, "POST", "/ui/api/models/a/unload")
    assert refused.status == 403
    assert "need a gateway key" in refused.error()
    assert (await ask(app.door, "GET", "/ui/api/status")).status == 200
    nothing_done(app)


async def test_a_valid_key_vouches_for_its_connection_and_no_other_does(tmp_path: Path) -> None:
    """N4: the listener learns which connections a key vouched for (`table.trust`), so a
    stranger never closes them for room."""
    app = build(tmp_path)
    vouched: list[str] = []
    hook = {TRUST: vouched.append}
    assert (await ask(app.door, "GET", "/v1/models", key=ALICE, extra=hook)).status == 200
    assert (await ask(app.door, "GET", "/v1/models", key="wrong", extra=hook)).status == 401
    assert (await ask(app.door, "GET", "/v1/models", extra=hook)).status == 401
    assert (await ask(app.door, "GET", "/health", extra=hook)).status == 200
    assert vouched == ["alice"]


class _Seen:
    """A route's books that keep each call the door let in."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def handler(self, call: Call) -> Response:
        self.calls.append(call)
        return Response()

    def close(self, tally: Tally, model: str, label: str) -> None:
        pass


async def test_the_hop_and_the_record_are_the_doors_decision(tmp_path: Path) -> None:
    """The gateway that relayed a request here, its affinity opt-out and its record are
    fields of the door's `Call`, passed to the lease: none travels beside it."""
    app, seen = build(tmp_path), _Seen()
    route = Route("/x", ("POST",), Need.MODEL, responds(seen.handler), Body.JSON, "body", seen)
    gw = app.gateway
    door = Door(Table([route]), gw, gw.settings, GatewayLimits(gw.settings, lambda: {}))
    hop = [(b"x-llamad-hop", b"frontid"), (b"x-llamad-affinity", b"off")]
    assert (await ask(door, "POST", "/x", {"model": "a"}, hop, key=MAIN)).status == 200
    assert (await ask(door, "POST", "/x", {"model": "a"}, key=MAIN)).status == 200
    relayed, plain = seen.calls
    assert (relayed.relayed, relayed.affinity) == ("frontid", False)
    assert (plain.relayed, plain.affinity) == (None, True)
    assert relayed.tally is not None
    assert relayed.tally is not plain.tally


def test_no_request_state_travels_in_a_context_variable() -> None:
    """The request's record and hop were context variables, read deep in the lease, so
    "never relay twice" was decided after the door: they are arguments now."""
    package = Path(__file__).parents[2] / "llamad" / "gateway"
    holding = [p for p in package.rglob("*.py") if "ContextVar" in p.read_text()]
    assert holding == []


# The routes whose answer stays open as long as the client likes.
LONG = {"/v1/events"}


async def test_a_limited_key_holds_a_bounded_number_of_long_streams(tmp_path: Path) -> None:
    """Every long-lived stream of the table counts against one cap per limited key: at
    the cap the next one is a 429 in the family's shape; a key with every right is the
    operator's and is not held to it; a stream that ends gives its place back."""
    app = build(tmp_path)
    long = [r for r in app.door.table.routes if r.long]
    assert {r.path for r in long} == LONG
    for route in long:
        held = [
            asyncio.create_task(ask(app.door, "GET", route.path, key=ALICE, timeout=30))
            for _ in range(LONG_STREAMS_PER_KEY)
        ]
        await until(lambda: app.door.streams.held["alice"] == LONG_STREAMS_PER_KEY, "held")
        refused = await ask(app.door, "GET", route.path, key=ALICE)
        assert refused.status == 429, route.path
        assert refused.json()["error"]["code"] == "too_many_streams"
        mine = asyncio.create_task(ask(app.door, "GET", route.path, key=MAIN, timeout=30))
        await until(lambda: app.door.streams.held["alice"] == LONG_STREAMS_PER_KEY, "still held")
        app.stop.set()  # every stream ends
        answers = await asyncio.gather(*held, mine)
        assert {a.status for a in answers} == {200}
        assert not app.door.streams.held
        app.stop.clear()
