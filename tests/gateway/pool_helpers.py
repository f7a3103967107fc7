"""A scripted asyncio server playing the pool's upstream, for what llama-server can't do
on demand (garbage, a close mid-answer, interim answers, trailers), and polling helpers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from llamad.upstream.pool import Pool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
JSON = [(b"content-type", b"application/json")]
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


async def eventually(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll `cond` every 10 ms until it holds; fail after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's head and body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    return head + await reader.readexactly(length)


@contextlib.asynccontextmanager
async def upstream(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server running `handler` per connection; yields its URL and a connection count."""
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        server.close()
        await server.wait_closed()


def every_request(reply: bytes) -> Handler:
    """An upstream that answers every request on a connection with `reply`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(reply)

    return handler


async def body_of(pool: Pool, url: str, method: str = "POST") -> tuple[int, bytes]:
    """One request's status and whole body; the answer closed."""
    answer = await pool.request(method, url, "/x", JSON, b"{}" if method == "POST" else None)
    try:
        return answer.status, await answer.aread()
    finally:
        answer.close()
