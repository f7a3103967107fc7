"""A fleet peer that lies, on loopback: its control API's status document names its
gateway on another address (127.0.0.2) and claims models with as many slots as it likes;
a gateway stand-in on each address records the requests it gets and answers a chat."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from helpers import wait_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from llamad.listener.limits import Limits
from llamad.listener.tcp import serve_tcp

ELSEWHERE = "127.0.0.2"  # where the status document says the gateway is


@dataclass
class Liar:
    """What the status document claims, and the requests each gateway address got."""

    models: dict[str, int]  # model name -> slots claimed
    control_port: int = 0
    gateway_port: int = 0
    got: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # host -> headers
    padding: int = 0  # bytes of padding the status document carries (a flood)

    @property
    def control(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def status(self, _request: Request) -> Response:
        instances = [
            {
                "name": name,
                "state": "running",
                "gateway": {"routable": True, "aliases": [], "slots": slots, "in_flight": 0},
            }
            for name, slots in self.models.items()
        ]
        doc = {
            "daemon": {"pid": 1, "started_at": "liar", "config_path": "/liar.toml"},
            "gateway": {"listen": f"{ELSEWHERE}:{self.gateway_port}"},
            "instances": instances,
        }
        if not self.padding:
            return JSONResponse(doc)
        head = json.dumps(doc)[:-1].encode() + b', "pad": "'
        return StreamingResponse(_padded(head, self.padding), media_type="application/json")

    def gateway(self, host: str) -> Starlette:
        async def chat(request: Request) -> Response:
            self.got.setdefault(host, []).append(dict(request.headers))
            body: dict[str, Any] = await request.json()
            return JSONResponse(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "from the peer"},
                            "finish_reason": "stop",
                        }
                    ],
                }
            )

        return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


async def _padded(head: bytes, size: int) -> AsyncIterator[bytes]:
    yield head
    for _ in range(size >> 20):
        yield b"a" * (1 << 20)
    yield b'"}'


def _port_free_on_both() -> int:
    for _ in range(50):
        with socket.socket() as one, socket.socket() as two:
            one.bind(("127.0.0.1", 0))
            port = one.getsockname()[1]
            try:
                two.bind((ELSEWHERE, port))
            except OSError:
                continue
            return port
    raise AssertionError("no port free on both loopback addresses")


@contextmanager
def serving(app: Any, host: str, port: int) -> Iterator[None]:
    """`app` on host:port in a thread of its own, until the block ends."""
    bound = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    served = serve_tcp(app, host, port, stop, bound.set, cap=64, limits=Limits)
    thread = threading.Thread(target=loop.run_until_complete, args=(served,), daemon=True)
    thread.start()
    try:
        wait_for(bound.is_set, 10, f"a stand-in on {host}:{port}")
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        if not thread.is_alive():
            loop.close()


@contextmanager
def lying_peer(models: dict[str, int], padding: int = 0) -> Iterator[Liar]:
    """The peer's control API on 127.0.0.1 and a gateway on both addresses, one port."""
    liar = Liar(models, _port_free_on_both(), _port_free_on_both(), padding=padding)
    control = Starlette(routes=[Route("/v1/status", liar.status)])
    with ExitStack() as stack:
        stack.enter_context(serving(control, "127.0.0.1", liar.control_port))
        for host in ("127.0.0.1", ELSEWHERE):
            stack.enter_context(serving(liar.gateway(host), host, liar.gateway_port))
        yield liar
