"""Relaying one request to its instance: nothing buffered, nothing left running.

The body is read whole (it names the model) and sent upstream with a Content-Length;
the answer goes back chunk by chunk as llama-server writes it. A client that goes away,
while its model loads or mid-stream, cancels the relay at once, which closes the
upstream connection, so llama-server stops generating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from urllib.parse import quote

from starlette.types import Scope, Send

from llamad.gateway.books.activity import Tally, now
from llamad.gateway.books.usage import HEAD_BYTES, from_chunks
from llamad.gateway.contract.families import family, gateway_shape
from llamad.gateway.contract.port import GatewayError, Upstream
from llamad.gateway.relay.naming import Rewrite
from llamad.gateway.relay.resend import from_leased
from llamad.gateway.relay.upstream_errors import refit
from llamad.upstream.answer import Answer
from llamad.upstream.connection import HIGH_WATER, Broken, NotAnswered
from llamad.upstream.pool import Pool, encode
from llamad.upstream.sending import Sending

# Hop-by-hop headers, our own framing, and the client's credentials: its key for the
# gateway, and its cookies (a browser sends those of every app on this host name), which
# no instance uses and a fleet peer must never be given.
_DROP_UP = {
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length",
    b"authorization", b"x-api-key", b"expect", b"cookie",
}  # fmt: skip
# llama-server reflects any Origin back: the gateway answers CORS itself (access/cors.py).
_DROP_DOWN = {
    b"connection", b"keep-alive", b"transfer-encoding", b"date", b"server",
    b"access-control-allow-origin", b"access-control-allow-credentials",
    b"access-control-allow-headers", b"access-control-allow-methods",
    b"access-control-expose-headers", b"access-control-max-age",
}  # fmt: skip
# What a path may hold as it is: the rest is percent-encoded for the request line.
# Not "%": the door decided on the path decoded once, so a `%` in it goes as `%25` and
# llama-server's own decoding gives back that path, never another (`/%2573lots`, once
# decoded `/%73lots`, must not reach llama-server's `/slots`).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


class Bad(GatewayError):
    """The request itself is wrong (no model, not JSON)."""

    status = 400
    code = "invalid_request"


class Relay:
    """Sends leased requests upstream over one pool of kept-alive connections."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def start(self, scope: Scope, upstream: Upstream, path: str, body: bytes) -> Sending:
        """The request for `upstream` at `path`, written at once when a kept connection
        to it is free (`Pool.start`): `relay` then waits for its answer."""
        headers = [(k, v) for k, v in _headers(scope) if k.lower() not in _DROP_UP]
        headers += encode(upstream.headers)
        query = scope.get("query_string", b"")
        target = _quoted(path) + ("?" + query.decode("latin-1") if query else "")
        send_body = body if body or scope["method"] in ("POST", "PUT", "PATCH") else None
        return self.pool.start(scope["method"], upstream.base_url, target, headers, send_body)

    async def relay(
        self,
        scope: Scope,
        send: Send,
        upstream: Upstream,
        path: str,
        body: bytes,
        first_byte: Callable[[int], None],
        rename: Rewrite | None = None,
        tally: Tally | None = None,
        sending: Sending | None = None,
    ) -> None:
        """Send the request to `upstream` at `path` (or wait for the answer to `sending`,
        `start`ed already) and stream the answer back, with `rename` applied to each
        chunk (naming.py) and an error answer refitted to the route's family
        (upstream_errors.py); `tally` gets the time of the body's first byte and the
        usage its end reports.

        Upstream timeouts: 10 s to connect, none after, so a long generation is never cut.
        """
        # NotAnswered (nothing of the answer came) goes to the caller, which may resend.
        answer = await self.pool.answer(sending or self.start(scope, upstream, path, body))
        answer = from_leased(upstream, answer)
        try:
            if answer.status >= 400:
                await _error(send, scope["path"], answer, first_byte)
            else:
                await self._answer(send, upstream, answer, first_byte, rename, scope["path"], tally)
        finally:
            answer.close()

    async def _answer(
        self,
        send: Send,
        upstream: Upstream,
        answer: Answer,
        first_byte: Callable[[int], None],
        rename: Rewrite | None,
        path: str,
        tally: Tally | None,
    ) -> None:
        drop = _DROP_DOWN if rename is None else _DROP_DOWN | {b"content-length"}
        out = [(k, v) for k, v in answer.headers if k.lower() not in drop]
        kind = next((v for k, v in answer.headers if k.lower() == b"content-type"), b"")
        sse = kind.split(b";")[0].strip().lower() == b"text/event-stream"
        if sse and not any(k.lower() == b"x-accel-buffering" for k, _ in out):
            out.append((b"x-accel-buffering", b"no"))
        elif _fits(answer.headers):
            # A whole answer (not a stream) is taken in before its head goes on: if its
            # instance or peer dies mid-body, nothing has reached the client yet, and the
            # request is sent again (resend.py) as if no answer had come.
            try:
                await answer.arrived()
            except Broken as exc:
                raise NotAnswered(f"the answer broke off: {exc}", sent=True) from exc
        await send({"type": "http.response.start", "status": answer.status, "headers": out})
        first_byte(answer.status)
        # Only the last two chunks are kept (no copy, no parsing on the way), and the
        # answer's first HEAD_BYTES: usage and timings end the answer (an Anthropic
        # stream's prompt counts start it), and are read from them once it is over.
        head = prev = last = b""
        ended = False
        try:
            async for chunk in answer.chunks():
                if not last and tally is not None:
                    tally.ttft = now()
                if len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                # The whole answer is in: its last chunk ends the response, in one send.
                ended = answer.complete
                if rename is not None:
                    chunk = rename(chunk) + (rename.flush() if ended else b"")
                await send({"type": "http.response.body", "body": chunk, "more_body": not ended})
                prev, last = last, chunk
            if not ended and rename is not None and (held := rename.flush()):
                await send({"type": "http.response.body", "body": held, "more_body": True})
                prev, last = last, held
        except OSError as exc:
            # The instance (or a fleet peer) broke off. A stream ends with an error
            # event, so a client can tell it from a finished answer.
            if sse:
                error = _sse_error(upstream, exc, path)
                await send({"type": "http.response.body", "body": error, "more_body": True})
        if not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        if tally is not None and last:
            tally.usage = from_chunks(prev, last, head)


async def _error(send: Send, path: str, answer: Answer, first_byte: Callable[[int], None]) -> None:
    """An error answer (small, read whole) with an honest status in `path`'s family."""
    complete = True
    try:
        raw = await answer.aread()
    except OSError:
        raw, complete = b"", False
    status, body = refit(path, answer.status, raw)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if body is raw and complete:  # passed through as it came
        headers = [(k, v) for k, v in answer.headers if k.lower() not in _DROP_DOWN]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    first_byte(status)
    await send({"type": "http.response.body", "body": body})


def _fits(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """The answer has a Content-Length the connection reads whole without its reader."""
    length = next((v for k, v in headers if k.lower() == b"content-length"), b"")
    return length.isdigit() and int(length) <= HIGH_WATER


def _sse_error(upstream: Upstream, exc: Exception, path: str) -> bytes:
    where = f" on {upstream.host}" if upstream.host else ""
    message = f"model {upstream.name!r}{where} broke off: {exc or type(exc).__name__}"
    data = gateway_shape(path, 502, "upstream_error", message)
    # Anthropic's clients read an error by its event name; OpenAI's by its data.
    event = b"event: error\n" if family(path) == "anthropic" else b""
    return event + b"data: " + data + b"\n\n"


@lru_cache(maxsize=256)  # bounded: routes are few, but a path-routed model may be any
def _quoted(path: str) -> str:
    return quote(path, safe=_PATH_SAFE)


def header(scope: Scope, name: bytes) -> str | None:
    """The value of request header `name` (lower case), if sent."""
    return next((v.decode("latin-1") for k, v in _headers(scope) if k == name), None)


def _headers(scope: Scope) -> Iterable[tuple[bytes, bytes]]:
    return scope["headers"]  # type: ignore[no-any-return]
