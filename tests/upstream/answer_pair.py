"""The same answer bytes read by the upstream client's connection and by h11's client
side, each to a comparable verdict: refused, or the answer (status, headers, body)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import h11

from llamad.upstream.connection import Broken, Connection


@dataclass(frozen=True)
class Read:
    """What a parser made of an answer: None fields when it refused it."""

    status: int | None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    complete: bool = False  # the body's end was seen (not cut off by the close)


REFUSED = Read(None)


class _Transport(asyncio.Transport):
    """Enough of a transport for a connection read off bytes in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def write(self, data: Any) -> None:
        pass


async def ours(data: bytes, pieces: int = 1) -> Read:
    """The answer as the pool's connection reads it, fed in `pieces`, then the close."""
    conn = Connection(("127.0.0.1", 80))
    transport = _Transport()
    conn.connection_made(transport)
    step = max(1, -(-len(data) // pieces))
    for at in range(0, len(data), step):
        if transport.closed:
            break
        conn.data_received(data[at : at + step])
    if not transport.closed:
        conn.connection_lost(None)
    try:
        await conn.head
    except Broken:
        return REFUSED
    headers = tuple((k.lower(), v) for k, v in conn.headers)
    status = conn.status
    body: list[bytes] = []
    try:
        while piece := await conn.read():
            body.append(piece)
    except Broken:
        return REFUSED  # an answer cut short: the relay breaks it off (h11 refuses it)
    return Read(status, headers, b"".join(body), complete=True)


def h11s(data: bytes, method: bytes = b"GET") -> Read:
    """The answer as h11's client side reads it after sending a `method` request."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/x", headers=[("host", "a")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    status: int | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body = bytearray()
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = tuple((bytes(k), bytes(v)) for k, v in event.headers.raw_items())
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return Read(status, tuple((k.lower(), v) for k, v in headers), bytes(body), True)
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                break
    except h11.RemoteProtocolError:
        return REFUSED
    return REFUSED  # no end: cut short by the close
