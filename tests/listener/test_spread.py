"""N4: local processes spread over 127/8 holding unfinished heads take no place from a
client on 127.0.0.1: loopback is one share, and a head still coming goes for room."""

from __future__ import annotations

import asyncio
import socket

import pytest
from helpers import free_port
from listener_helpers import Client, EchoApp, Stage, post

from llamad.listener.limits import CONTROL, Limits, Refusals
from llamad.listener.server import Listener
from llamad.listener.tcp import bind_tcp

pytestmark = pytest.mark.timeout(30)

CAP = 16


async def opened(source: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def test_unfinished_heads_from_all_of_loopback_lock_no_one_out() -> None:
    port, stop, bound = free_port(), asyncio.Event(), asyncio.Event()
    limits = Limits(max_body=CONTROL.max_body, head_timeout=20.0, request_timeout=20.0)
    listener = Listener(EchoApp(Stage()), CAP, Refusals("test"), lambda: limits)
    task = asyncio.ensure_future(listener.serve(bind_tcp("127.0.0.1", port), stop, bound.set))
    strangers: list[socket.socket] = []
    loop = asyncio.get_running_loop()
    try:
        await bound.wait()
        for n in range(2, 6):
            for _ in range(CAP):
                sock = await opened(f"127.0.0.{n}", port)
                await loop.sock_sendall(sock, b"POST /x HTTP/1.1\r\nHost: x\r\n")  # no end
                strangers.append(sock)
        async with asyncio.timeout(10):
            sock = await opened("127.0.0.1", port)
            client = Client(*await asyncio.open_connection(sock=sock))
            await client.send(post("/mine", b"hello"))
            reply = await client.reply()
        assert reply.status == 200
        assert reply.json()["path"] == "/mine"
        client.close()
    finally:
        for sock in strangers:
            sock.close()
        stop.set()
        async with asyncio.timeout(15):
            await task
