"""The gateway's lane (`api/lane.py`): a body-routed POST whose model serves now.

Most of a gateway's requests name a model that one local instance serves and that has
a slot free. Those are served here, at the listener, and everything else goes to the
app as before: a lane request is admitted, relayed, resent after a restart, answered
on error and booked exactly as `app.Proxied` does it, by the same code. What the lane
leaves out is what only other requests need: the middleware's checks that cannot
refuse it (decided from its head in `offer`, and its key in `take`), the keep-alive
beats of a model that loads, the queue, the balancer, the fleet.

The decision to serve and the slot it takes are one synchronous step (`take`), so no
other request can take the slot between them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from llamad.common.lanes import Headers, LaneAnswer, LaneRequest
from llamad.config.gateway_keys import NamedKey
from llamad.gateway.activity import Tally
from llamad.gateway.core import Gateway
from llamad.gateway.keyguard import KeyGuard
from llamad.gateway.keys import given, lookup
from llamad.gateway.limits import GatewayLimits
from llamad.gateway.naming import renamer
from llamad.gateway.pooled import Sending
from llamad.gateway.port import GatewayError, Upstream
from llamad.gateway.proxy import Relay
from llamad.gateway.replicas.hints import HOP_HEADER
from llamad.gateway.resend import answered
from llamad.gateway.routed import BODY_ROUTED, Books, outgoing, send_error
from llamad.gateway.shapes import valid_text
from llamad.supervise.facts import Facts

_PATHS = frozenset(BODY_ROUTED)
Server = tuple[str, int] | None
# A browser's request (CORS is the app's) or one another gateway relayed (the balancer's).
_REFUSED = (b"origin", HOP_HEADER.encode())


class GatewayLane:
    """Implements `api/lane.Lane` for the gateway's listener."""

    def __init__(
        self,
        gateway: Gateway,
        relay: Relay,
        limits: GatewayLimits,
        host_ok: Callable[[bytes, Server], bool],
        guard: KeyGuard,
    ) -> None:
        """`host_ok(host, server)`: the Host check of the origin guard (`origin.py`);
        `guard`: the app's count of wrong keys (`keycheck.py`)."""
        self.gateway, self.relay, self.limits, self.host_ok = gateway, relay, limits, host_ok
        self.guard = guard
        self.books = Books(gateway)

    def offer(self, path: str, headers: Headers, server: Server, client: str | None) -> bool:
        """A body-routed path, and nothing in the head that the middleware would answer
        or the balancer read: a key the app refuses before the body comes, a browser's
        Origin, a Host not served here, a body past `[gateway] max_body`, a relaying
        gateway's hop."""
        if path not in _PATHS or self._caller(client, headers) is False:
            return False
        for name, value in headers:
            if name == b"host":
                if not self.host_ok(value, server):
                    return False
            elif name in _REFUSED or (
                name == b"content-length" and not _within(value, self.limits.default)
            ):
                return False
        return True

    def take(self, request: LaneRequest, answer: LaneAnswer) -> Coroutine[Any, Any, None] | None:
        """Serve `request` if its key is good for its model and that model serves now on
        one local instance (admitted here), else None."""
        if len(request.body) > self.limits.default:
            return None
        caller = self._caller(request.client, request.headers)
        if caller is False:
            return None  # the app refuses it, and counts a wrong key
        try:
            # Decoded as UTF-8 here: json.loads would first guess among UTF-16 and 32 (a
            # body in those goes to the app, which reads it so).
            doc = json.loads(request.body.decode())
        except (ValueError, RecursionError):
            return None  # the app answers why
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or not model or not valid_text(model):
            return None
        facts = self._route(model, caller)
        if facts is None:
            return None
        # All that may fail comes before the admission: after it, nothing may stand
        # between the slot taken and its release registered.
        upstream = self.gateway.upstreams.of(facts)
        scope = {
            "method": "POST", "path": request.path, "query_string": request.query,
            "headers": request.headers,
        }  # fmt: skip
        body = outgoing(upstream, request.path, request.body)
        sched = self.gateway.sched
        slot = sched.slot(facts.name)
        if sched.try_admit(slot, None, facts) is None:
            return None
        release = _Once(lambda: sched.release(slot))
        answer.ended.append(release)
        try:
            # Sent before the rest is made: the model reads it meanwhile.
            sending = self.relay.start(scope, upstream, request.path, body)
        except BaseException:
            release()
            raise
        answer.ended.append(sending.abandon)
        try:
            key = None if caller is None else caller.name
            tally = Tally(request.path, request.client, key, began=request.began)
            tally.model, tally.instance = model, upstream.name
            tally.waited(0.0, loading=False)
            booked = _Once(lambda: self.books.close(tally, model, upstream.name))
            answer.ended.append(booked)
            work = _Work(scope, request.body, model, upstream, sending, tally, release, booked)
        except BaseException:
            sending.abandon()
            release()
            raise
        return self._serve(answer, work)

    def _caller(self, client: str | None, headers: Headers) -> NamedKey | Literal[False] | None:
        """The request's key (None: no keys are configured); False when the app must
        answer it: no valid key, or an address blocked for guessing."""
        keys = self.gateway.settings().keys
        if not keys:
            return None
        scope = {"client": (client, 0), "headers": headers}
        if self.guard.blocked(scope) is not None:
            return False
        return lookup(keys, given(scope)) or False

    def _route(self, model: str, caller: NamedKey | None) -> Facts | None:
        """The one local instance `model` names, if the lane may serve it there."""
        gateway = self.gateway
        if gateway.fleet is not None and gateway.settings().fleet:
            return None  # a peer may serve it too: the balancer's to choose
        facts = gateway.router.find(model)
        # An instance's own name is never an alias: only an alias can be shared.
        if facts is None or (facts.name != model and gateway.router.sharing(model)):
            return None
        if caller is not None and caller.models is not None and facts.name not in caller.models:
            return None  # the app answers 403
        return facts

    async def _serve(self, answer: LaneAnswer, work: _Work) -> None:
        path, tally, label = work.scope["path"], work.tally, work.upstream.name
        first: list[Sending] = [work.sending]

        def first_byte(code: int) -> None:
            self.books.first_byte(tally, label, code)

        def attempt(up: Upstream) -> Awaitable[None]:
            # The first attempt waits for the request sent already; a resend sends anew.
            sending = first.pop() if first and up is work.upstream else None
            body = b"" if sending is not None else outgoing(up, path, work.body)
            rename = renamer(up, work.asked)
            send = answer.send
            return self.relay.relay(
                work.scope, send, up, path, body, first_byte, rename, tally, sending
            )

        try:
            await answered(self.gateway, work.upstream, attempt)
        except GatewayError as exc:
            tally.status = exc.status
            work.release()  # as the app's lease ends before its error answer
            await send_error(answer.send, exc, path)
        finally:
            work.release()
            work.booked()


@dataclass(frozen=True, slots=True)
class _Work:
    """A lane request taken: what serving it needs."""

    scope: dict[str, Any]
    body: bytes  # as the client sent it
    asked: str
    upstream: Upstream
    sending: Sending
    tally: Tally
    release: Callable[[], None]
    booked: Callable[[], None]


def _within(length: bytes, cap: int) -> bool:
    return length.isdigit() and int(length) <= cap


class _Once:
    """`callback`, called at most once however many ways the request ends."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback: Callable[[], None] | None = callback

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()
