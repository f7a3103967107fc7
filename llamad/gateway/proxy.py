"""Relaying one request to its instance: nothing buffered, nothing left running.

The body is read whole (it names the model) and sent upstream with a Content-Length;
the answer goes back chunk by chunk as llama-server writes it. A client that goes away,
while its model loads or mid-stream, cancels the relay at once, which closes the
upstream connection, so llama-server stops generating.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable

import aiohttp
from starlette.types import Receive, Scope, Send
from yarl import URL

from llamad.gateway.port import GatewayError, Upstream, UpstreamError

# Hop-by-hop headers, our own framing, and the client's credentials for the gateway.
_DROP_UP = {
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length",
    b"authorization", b"x-api-key", b"expect",
}  # fmt: skip
_DROP_DOWN = {b"connection", b"keep-alive", b"transfer-encoding", b"date", b"server"}
# Connect quickly or fail; never cut a long generation.
TIMEOUTS = aiohttp.ClientTimeout(total=None, sock_connect=10.0)
# Below the 5 s keep-alive of llama-server (cpp-httplib's default) and of uvicorn (a
# fleet peer's gateway), so a pooled connection is not reused just as the server closes it.
KEEPALIVE_S = 4.0

Headers = list[tuple[bytes, bytes]]


class Bad(GatewayError):
    """The request itself is wrong (no model, not JSON)."""

    status = 400
    code = "invalid_request"


class ClientGone(Exception):
    """The client disconnected before its request was read."""


async def read_body(receive: Receive) -> bytes:
    """The whole request body."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def until_disconnect(receive: Receive) -> None:
    """Return when the client has gone (the body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def guard(receive: Receive, work: Awaitable[None]) -> None:
    """Run `work`; cancel it the moment the client disconnects."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(until_disconnect(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not gone.done() or gone.cancelled():
                raise


def upstream_session() -> aiohttp.ClientSession:
    """Keep-alive connections to the instances and fleet peers, as many as streams need.

    aiohttp rather than httpx, which llamad uses everywhere else: on the relay's hot path
    httpx's transport cost three to five times aiohttp's CPU per request (bench/machinery).
    """
    connector = aiohttp.TCPConnector(limit=0, ssl=False, keepalive_timeout=KEEPALIVE_S)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=TIMEOUTS,
        auto_decompress=False,  # bytes pass through as the instance encoded them
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
    )


class Relay:
    """Sends leased requests upstream over one pooled aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def relay(
        self,
        scope: Scope,
        send: Send,
        upstream: Upstream,
        path: str,
        body: bytes,
        first_byte: Callable[[int], None],
    ) -> None:
        """Send the request to `upstream` at `path` and stream the answer back."""
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in _headers(scope)
                   if k.lower() not in _DROP_UP]  # fmt: skip
        headers += upstream.headers.items()
        query = scope.get("query_string", b"")
        # encoded=True: the path and query reach the instance byte for byte.
        url = URL(upstream.base_url + path + ("?" + query.decode() if query else ""), encoded=True)
        send_body = body if body or scope["method"] in ("POST", "PUT", "PATCH") else None
        try:
            response = await self.session.request(
                scope["method"], url, headers=headers, data=send_body, allow_redirects=False
            )
        except (aiohttp.ClientError, OSError) as exc:
            name = upstream.model.name
            raise UpstreamError(f"model {name!r}: {exc or type(exc).__name__}") from None
        try:
            out = [(k, v) for k, v in response.raw_headers if k.lower() not in _DROP_DOWN]
            sse = response.content_type == "text/event-stream"
            if sse and "x-accel-buffering" not in response.headers:
                out.append((b"x-accel-buffering", b"no"))
            await send({"type": "http.response.start", "status": response.status, "headers": out})
            first_byte(response.status)
            try:
                async for chunk in response.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (aiohttp.ClientError, OSError) as exc:
                # The instance (or a fleet peer) broke off. A stream ends with an error
                # event, so a client can tell it from a finished answer.
                if sse:
                    error = _sse_error(upstream, exc)
                    await send({"type": "http.response.body", "body": error, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            # close(), not release(): an answer not read to its end (the client left)
            # must drop the connection, so the instance stops generating.
            if response.content.at_eof():
                response.release()
            else:
                response.close()


def _sse_error(upstream: Upstream, exc: Exception) -> bytes:
    where = f" on {upstream.model.host}" if upstream.model.host else ""
    message = f"model {upstream.model.name!r}{where} broke off: {exc or type(exc).__name__}"
    error = {"message": message, "type": "server_error", "code": "upstream_error"}
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


def header(scope: Scope, name: bytes) -> str | None:
    """The value of request header `name` (lower case), if sent."""
    return next((v.decode("latin-1") for k, v in _headers(scope) if k == name), None)


def _headers(scope: Scope) -> Iterable[tuple[bytes, bytes]]:
    return scope["headers"]  # type: ignore[no-any-return]


def now() -> float:
    """The clock latency is measured with."""
    return time.perf_counter()
