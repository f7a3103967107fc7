"""The daemon's client for its children (probes, metrics scrapes): kept-alive connections,
answers framed every way HTTP/1.x allows, and a kept connection the server closed."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from llamad.backends.local_http import Client

Answer = Callable[[bytes], bytes | None]  # request head -> answer bytes, None: close at once


class Server:
    """A loopback server that answers each request head with `answer(head)`; it counts
    the connections it accepted."""

    def __init__(self, answer: Answer, close_after: bool = False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.heads: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/health"

    async def stop(self) -> None:
        self.server.close()
        for w in self.writers:
            w.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                if b"content-length:" in head.lower():
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    self.heads.append(await reader.readexactly(length))
                out = self.answer(head)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


Serve = Callable[..., Awaitable[tuple[Server, str]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[Server] = []

    async def start(answer: Answer, close_after: bool = False) -> tuple[Server, str]:
        server = Server(answer, close_after)
        servers.append(server)
        return server, await server.start()

    yield start
    for server in servers:
        await server.stop()


OK = b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"status":"ok"}'


@pytest.mark.timeout(10)
async def test_probes_share_one_kept_connection(serve: Serve) -> None:
    server, url = await serve(lambda head: OK)
    client = Client()
    try:
        replies = [await client.request("GET", url, 2) for _ in range(5)]
    finally:
        client.close()
    assert {r.status for r in replies} == {200}
    assert replies[0].body == b'{"status":"ok"}'
    assert server.connections == 1
    assert server.heads[0].lower().startswith(b"get /health http/1.1\r\nhost: 127.0.0.1:")


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("answer", "body"),
    [
        # HTTP/1.0 without a length (Python's http.server, as mlx_lm.server): to the close
        (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", b"all of it"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", b"abc"),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok"),
    ],
)
async def test_answers_framed_every_way_are_read_whole(
    serve: Serve, answer: bytes, body: bytes
) -> None:
    _, url = await serve(lambda head: answer, close_after=True)
    client = Client()
    try:
        first = await client.request("GET", url, 2)
        second = await client.request("POST", url, 2, b"{}")  # after the server closed
    finally:
        client.close()
    assert (first.status, first.body) == (200, body)
    assert (second.status, second.body) == (200, body)


@pytest.mark.timeout(10)
async def test_a_kept_connection_the_server_dropped_is_not_a_failed_probe(
    serve: Serve,
) -> None:
    """The server closes a kept connection as the next request goes out on it: the request
    goes again on a new connection instead of failing."""
    answers = iter([OK, None, OK])
    server, url = await serve(lambda head: next(answers))
    client = Client()
    try:
        assert (await client.request("GET", url, 2)).status == 200
        assert (await client.request("GET", url, 2)).status == 200
    finally:
        client.close()
    assert server.connections == 2


@pytest.mark.timeout(10)
async def test_refused_and_silent_servers_raise_oserrors(serve: Serve) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = Client()
    with pytest.raises(ConnectionRefusedError):
        await client.request("GET", f"http://127.0.0.1:{port}/health", 2)
    server, url = await serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Len")
    with pytest.raises(TimeoutError):
        await client.request("GET", url, 0.2)
    # The half-read connection is not kept: the next request opens its own.
    with pytest.raises(TimeoutError):
        await client.request("GET", url, 0.2)
    client.close()
    assert server.connections == 2


@pytest.mark.timeout(10)
async def test_an_answer_that_is_not_http_is_a_connection_error(
    serve: Serve,
) -> None:
    _, url = await serve(lambda head: b"SSH-2.0-OpenSSH_9.6\r\n")
    client = Client()
    try:
        with pytest.raises(ConnectionError, match="unreadable answer"):
            await client.request("GET", url, 2)
    finally:
        client.close()


HOSTILE = {
    "a long head": b"HTTP/1.1 200 OK\r\nx-long: " + b"v" * 100_000 + b"\r\n\r\n",
    "many lines": b"HTTP/1.1 200 OK\r\n" + b"x-a: b\r\n" * 5000 + b"content-length: 0\r\n\r\n",
    # Past one read: what arrives in one may pass the bound by that read.
    "a long trailer": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
    b"x-t: " + b"v" * 2_000_000 + b"\r\n\r\n",
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_an_answer_past_a_requests_limits_is_a_connection_error(
    serve: Serve, case: str
) -> None:
    """Held as the relay's answers are (N2 of #48): a head, or what a chunked body spends
    on anything but its data, is bounded in bytes."""
    _, url = await serve(lambda head: HOSTILE[case])
    client = Client()
    try:
        with pytest.raises(ConnectionError):
            await client.request("GET", url, 5)
    finally:
        client.close()
