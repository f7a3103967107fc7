"""A chunked body's trailers never become request headers (issue #30): uvicorn added them
to the headers the app holds, and the gateway relayed them upstream as headers."""

from __future__ import annotations

import asyncio
import json
import socket

from helpers import free_port, until
from starlette.types import Receive, Scope, Send

from llamad.listener.tcp import serve_tcp


async def echo_headers(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, then answers the request's headers as JSON."""
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    body = json.dumps([k.decode() for k, _ in scope["headers"]]).encode()
    length = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": body})


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_trailers_are_not_headers() -> None:
    port, stop = free_port(), asyncio.Event()
    server = asyncio.ensure_future(serve_tcp(echo_headers, "127.0.0.1", port, stop))
    try:
        await until(lambda: _listening(port), 10, "the listener")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: x-sneaky\r\n"
            b"Connection: close\r\n\r\n2\r\nhi\r\n0\r\n"
            b"x-sneaky: 1\r\nauthorization: Bearer a\r\n\r\n"
        )
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), answer
        names = json.loads(body)
        assert "transfer-encoding" in names
        assert "x-sneaky" not in names
        assert "authorization" not in names
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await server
