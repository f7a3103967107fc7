"""A listener served in process over an app that says what it received, and HTTP/1.1
spoken by hand on a socket with each answer parsed by h11, so that framing is checked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import h11
from helpers import free_port

from llamad.listener.limits import CONTROL, Limits, Refusals
from llamad.listener.server import Listener
from llamad.listener.tcp import bind_tcp

Message = dict[str, Any]


class Stage:
    """What the app did, in order, and the requests it holds until released."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.holds: dict[str, asyncio.Future[None]] = {}

    async def begin(self, path: str) -> None:
        self.log.append(f"began {path}")
        if path in self.holds:
            await self.holds[path]

    def hold(self, path: str) -> asyncio.Future[None]:
        self.holds[path] = asyncio.get_running_loop().create_future()
        return self.holds[path]


class EchoApp:
    """Answers, as JSON, the request it received; `handlers` answer some paths their own way."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.handlers: dict[str, Callable[..., Any]] = {}

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if scope["path"] in self.handlers:
            await self.handlers[scope["path"]](scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        await self.stage.begin(scope["path"])
        said = {
            "method": scope["method"],
            "http_version": scope["http_version"],
            "path": scope["path"],
            "raw_path": scope["raw_path"].decode("latin-1"),
            "query": scope["query_string"].decode("latin-1"),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
            "body": body.decode("latin-1"),
        }
        payload = json.dumps(said).encode()
        length = [(b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": length})
        await send({"type": "http.response.body", "body": payload})
        self.stage.log.append(f"answered {scope['path']}")


@dataclass
class Reply:
    status: int
    headers: dict[bytes, bytes]  # lower-case names; a repeated name keeps its last value
    body: bytes
    informational: list[int] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """One connection spoken by hand; each answer parsed by h11."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = b""

    @classmethod
    async def open(cls, port: int, rcvbuf: int | None = None) -> Client:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        return cls(*await asyncio.open_connection(sock=sock))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("closed before " + repr(marker))
            self.buf += data
        got, _, self.buf = self.buf.partition(marker)
        return got + marker

    async def reply(self, method: str = "POST") -> Reply:
        """The next answer; raises h11.RemoteProtocolError on one broken off."""
        conn = h11.Connection(h11.CLIENT)
        # h11 parses an answer only to a request it saw sent: the bytes went by hand.
        conn.send(h11.Request(method=method, target="/", headers=[("host", "x")]))
        conn.send(h11.EndOfMessage())
        if self.buf:  # b"" would tell h11 the connection closed
            conn.receive_data(self.buf)
        self.buf = b""
        reply = Reply(0, {}, b"")
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await self.reader.read(65536))
            elif isinstance(event, h11.InformationalResponse):
                reply.informational.append(event.status_code)
            elif isinstance(event, h11.Response):
                reply.status, reply.headers = event.status_code, dict(event.headers)
            elif isinstance(event, h11.Data):
                reply.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.buf = conn.trailing_data[0]
                return reply
            else:
                raise ConnectionError(f"unexpected {event!r}")

    async def at_eof(self) -> bool:
        """Whether the server closed the connection (after what was already read)."""
        return not self.buf and await self.reader.read(1) == b""

    async def to_eof(self, within: float = 5.0) -> bytes:
        """All the server writes until it closes the connection."""
        got, self.buf = self.buf, b""
        async with asyncio.timeout(within):
            while data := await self.reader.read(65536):
                got += data
        return got

    def close(self) -> None:
        self.writer.close()


def post(path: str, body: bytes, *extra: str, version: str = "1.1") -> bytes:
    head = [f"POST {path} HTTP/{version}", "Host: x", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def post_chunked(path: str, parts: list[bytes], *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", "Transfer-Encoding: chunked", *extra]
    chunks = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in parts)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + chunks + b"0\r\n\r\n"


@dataclass
class Served:
    port: int
    stop: asyncio.Event
    task: asyncio.Future[None]
    stage: Stage
    app: EchoApp
    listener: Listener
    clients: list[Client] = field(default_factory=list)

    async def connect(self, rcvbuf: int | None = None) -> Client:
        """A client closed when the test ends, however it ends."""
        client = await Client.open(self.port, rcvbuf)
        self.clients.append(client)
        return client


@contextlib.asynccontextmanager
async def served(
    limits: Callable[[], Limits] = lambda: CONTROL,
    draining: Callable[[], bool] = lambda: False,
    cap: int = 64,
) -> AsyncIterator[Served]:
    stage = Stage()
    app = EchoApp(stage)
    port, stop, bound = free_port(), asyncio.Event(), asyncio.Event()
    listener = Listener(app, cap, Refusals("test"), limits, draining=draining)
    task = asyncio.ensure_future(listener.serve(bind_tcp("127.0.0.1", port), stop, bound.set))
    serving = Served(port, stop, task, stage, app, listener)
    try:
        async with asyncio.timeout(10):
            await bound.wait()
        yield serving
    finally:
        for client in serving.clients:
            client.close()
        stop.set()
        async with asyncio.timeout(15):
            await task


def said(reply: Reply, path: str, body: bytes) -> dict[str, Any]:
    """What the echo app received, checked to be `path` and `body`."""
    assert reply.status == 200, reply
    doc: dict[str, Any] = reply.json()
    assert (doc["path"], doc["body"]) == (path, body.decode("latin-1"))
    return doc
