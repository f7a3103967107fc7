"""The door: every request to the gateway passes here, and only here is it decided.

In order: the `Host` (naming this listener; the listener has refused two) and the
`Origin` (one; the CORS answers), the route (`table.py`), the caller (its key, wrong keys
counted per address by `KeyGuard`), what that caller may do (`Need`, `scope.py`), the
body (read whole for the routes that take one: UTF-8 JSON, the model it names, that
model's body limit), and the start of the request's books. The route then gets a `Call`
holding all of it; nothing after the door reads a caller from anywhere else, nor checks
it again.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from llamad.common.hosts import client_key, is_loopback
from llamad.common.long_streams import LongStreams, refused
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.access import cors
from llamad.gateway.access.body import decide
from llamad.gateway.access.call import Call
from llamad.gateway.access.client_side import ClientGone, read_body
from llamad.gateway.access.hop import AFFINITY, HOP, affinity_on, relayed_by
from llamad.gateway.access.keyguard import KeyGuard
from llamad.gateway.access.keys import Keys, given
from llamad.gateway.access.limits import GatewayLimits
from llamad.gateway.access.origin import Policy
from llamad.gateway.access.refusal import Refusal
from llamad.gateway.access.scope import Models, may_use, not_for_scoped, unknown
from llamad.gateway.access.table import Body, Need, Route, Table
from llamad.gateway.books.activity import Tally, begin, now
from llamad.gateway.contract.caller import ANYONE, Caller
from llamad.listener.limits import Refused
from llamad.listener.table import trust

_SCOPED = (Need.MODEL, Need.ACTION)
_NOT_FOUND = {404: ("not_found", "Not Found"), 405: ("method_not_allowed", "Method Not Allowed")}


class Door:
    """The gateway's ASGI app: decides each request, then runs its route."""

    def __init__(
        self,
        table: Table,
        models: Models,
        settings: Callable[[], GatewayConfig],
        limits: GatewayLimits,
        guard: KeyGuard | None = None,
        refused: Refused | None = None,
        hostname: Callable[[], str] = socket.gethostname,
        streams: LongStreams | None = None,
    ) -> None:
        self.table, self.models, self.settings, self.limits = table, models, settings, limits
        self.guard, self.refused, self.hostname = guard or KeyGuard(), refused, hostname
        self.streams = streams or LongStreams()
        self._rules: tuple[GatewayConfig, Policy, Keys] | None = None

    def rules(self) -> tuple[GatewayConfig, Policy, Keys]:
        """The settings in force, with their Host and Origin policy and their keys
        (made again when a reload changes the settings)."""
        cfg = self.settings()
        if self._rules is None or self._rules[0] is not cfg:
            self._rules = (cfg, Policy(cfg, self.hostname()), Keys(cfg.keys))
        return self._rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # served with lifespan off and no websockets
        began = now()
        try:
            await self._decide(scope, receive, send, began)
        except Refusal as exc:
            await exc.answer(send, scope["path"])

    async def _decide(self, scope: Scope, receive: Receive, send: Send, began: float) -> None:
        cfg, policy, keys = self.rules()
        host = origin = auth = api_key = hop = affinity = None
        origins = 0
        for name, value in scope["headers"]:
            if name == b"host":
                host = value  # one at most: the listener refuses two
            elif name == b"origin":
                origin, origins = value, origins + 1
            elif name == b"authorization":
                auth = value
            elif name == b"x-api-key":
                api_key = value
            elif name == HOP:
                hop = value
            elif name == AFFINITY:
                affinity = value
        if host is not None and not policy.host_ok(host, scope.get("server")):
            raise self._counted(scope, "host_not_allowed", "this Host is not served here")
        if origins > 1:
            # A browser sends one: two are forged, and whichever one the check took, the
            # other might be the one a CORS answer or a log believes. 403 like two Hosts.
            message = "a request has one Origin; this has two"
            raise self._counted(scope, "origin_not_allowed", message)
        if origin is not None:
            if not policy.origin_ok(origin, host):
                message = "this origin is not allowed; see allowed_origins"
                raise self._counted(scope, "origin_not_allowed", message)
            if cors.is_preflight(scope):
                await cors.preflight(scope, send, origin)
                return
            send = cors.with_cors(send, origin)
        try:
            secret = given(api_key, auth)
            await self._route(scope, receive, send, began, cfg, keys, secret, hop, affinity)
        except Refusal as exc:
            if exc.code == "body_too_large":
                self._count(scope, exc.code)
            await exc.answer(send, scope["path"])

    async def _route(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        began: float,
        cfg: GatewayConfig,
        keys: Keys,
        secret: bytes,
        hop: bytes | None,
        affinity: bytes | None,
    ) -> None:
        found = self.table.find(scope["method"], scope["path"])
        need = Need.KEY if isinstance(found, int) else found[0].need
        caller = self._caller(scope, keys, secret) if keys and need is not Need.OPEN else ANYONE
        if isinstance(found, int):
            raise self._no_route(found, scope["path"])
        route, params = found
        if need is Need.MANAGE and caller.scoped:
            raise not_for_scoped(caller)
        if need is Need.ACTION and not keys and not is_loopback(cfg.host):
            raise Refusal(403, "forbidden", "page actions need a gateway key on this address")
        body = b""
        if route.body is not Body.NONE:
            try:
                body = await read_body(receive)
            except ClientGone:
                return  # nobody to answer
        if route.books is None:
            call = self._let_in(
                route, scope, receive, send, caller, params, body, None, hop, affinity
            )
            if route.long and caller.scoped:
                await self._long(route, call)
            else:
                await route.handler(call)
            return
        tally = begin(scope, began, caller.name)  # the lease and the relay fill it in
        try:
            call = self._let_in(
                route, scope, receive, send, caller, params, body, tally, hop, affinity
            )
        except Refusal as exc:
            tally.status, tally.model = exc.status, exc.model
            route.books.close(tally, exc.model, "")
            raise
        await route.handler(call)

    async def _long(self, route: Route, call: Call) -> None:
        """A long-lived stream for a limited key: one of its `LongStreams` while it runs."""
        key = call.caller.name or ""  # scoped: a named key
        if not self.streams.take(key):
            raise Refusal(429, "too_many_streams", refused(self.streams.limit))
        try:
            await route.handler(call)
        finally:
            self.streams.give(key)

    def _caller(self, scope: Scope, keys: Keys, secret: bytes) -> Caller:
        caller = keys.find(secret) if secret else None
        if caller is None:
            # Only the guesses wait: a stranger guessing from the same address (every local
            # process shares loopback's) never locks out a client holding a valid key.
            if (wait := self.guard.blocked(scope)) is not None:
                raise Refusal(429, "rate_limited", "too many wrong keys; wait", wait)
            self.guard.failed(scope, bool(secret))
            message = "a valid API key is required (Bearer or x-api-key)"
            raise Refusal(401, "invalid_api_key", message)
        if caller.name is not None:  # the listener never closes its connection for a stranger
            trust(scope, caller.name)
        return caller

    def _let_in(
        self,
        route: Route,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        params: dict[str, str],
        body: bytes,
        tally: Tally | None,
        hop: bytes | None,
        affinity: bytes | None,
    ) -> Call:
        """The call, once its body and the model it names are read and its caller may
        use that model; `hop` and `affinity` are its headers for the balancer (`hop.py`)."""
        doc, model = None, ""
        if route.body is not Body.NONE or route.model is not None:
            doc, model = decide(route, scope, params, body, self.limits)
        if route.need in _SCOPED and caller.scoped:
            path = scope["path"]
            if not may_use(self.models, caller, model):
                raise unknown(self.models, caller, model, path)
        return Call(
            scope, receive, send, caller, params, body, doc, model, tally,
            affinity_on(affinity), relayed_by(hop),
        )  # fmt: skip

    def _no_route(self, status: int, path: str) -> Refusal:
        code, message = _NOT_FOUND[status]
        headers = None
        if status == 405:
            headers = [(b"allow", ", ".join(self.table.allowed(path)).encode())]
        return Refusal(status, code, message, headers=headers)

    def _counted(self, scope: Scope, reason: str, message: str) -> Refusal:
        self._count(scope, reason)
        return Refusal(403, reason, message)

    def _count(self, scope: Scope, reason: str) -> None:
        if self.refused is not None:
            client = scope.get("client")
            self.refused(reason, client_key(client[0]) if client else None)
