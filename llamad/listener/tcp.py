"""A listener on TCP, optionally TLS: the remote control API's and the gateway's."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

from llamad.common.fdlimit import connection_cap
from llamad.listener.binding import Binding, bind_patiently
from llamad.listener.exchange import App
from llamad.listener.limits import CONTROL, Limits, Refusals, Refused, Shape, control_shape
from llamad.listener.server import GRACEFUL_SHUTDOWN_S, Listener


def bind_tcp(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on host:port (SO_REUSEADDR: a restart finds it free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not create_server's 0: accepted sockets inherit it, and asyncio
    # sets TCP_NODELAY only on sockets that say TCP. Without it an answer written in
    # two parts (a stream's head, then its body) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def tls_context(certfile: Path, keyfile: Path | None) -> ssl.SSLContext:
    """A server's TLS context with the standard library's defaults (TLS 1.2 and up)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    return context


async def serve_tcp(
    app: App,
    host: str,
    port: int,
    shutdown: asyncio.Event,
    on_bound: Callable[[], None] | None = None,
    *,
    ssl_certfile: Path | None = None,
    ssl_keyfile: Path | None = None,
    cap: int | None = None,
    limits: Callable[[], Limits] = lambda: CONTROL,
    shape: Shape = control_shape,
    refused: Refused | None = None,
    binding: Binding | None = None,
    bind: Callable[[str, int], socket.socket] = bind_tcp,
    draining: Callable[[], bool] = lambda: False,
    grace: Callable[[], float] = lambda: GRACEFUL_SHUTDOWN_S,
) -> None:
    """Serve `app` on host:port (HTTPS when given a cert and key) until `shutdown` is set,
    at most `cap` connections (default: a control listener's), each held to `limits()`;
    `draining` and `grace` as `Listener` takes them.

    An address not up yet, or a port still held, is waited for (`bind_patiently`), told
    in `binding`; any other failure to bind raises OSError before serving.
    """
    cap = cap or connection_cap()
    tls = tls_context(ssl_certfile, ssl_keyfile) if ssl_certfile is not None else None
    binding = binding or Binding("tcp", f"{host}:{port}")
    # Its backlog is the listener's (`server.py`), set when it starts serving.
    sock = await bind_patiently(lambda: bind(host, port), binding, shutdown)
    if sock is None:
        return  # told to stop while it waited
    listener = Listener(
        app, cap, refused or Refusals("tcp"), limits, shape, draining=draining, grace=grace
    )
    await listener.serve(sock, shutdown, on_bound, tls)
