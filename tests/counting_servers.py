"""Loopback HTTP servers that answer every POST with a 2-byte 200 and count the requests:
targets for the bench's rounds, without a llama-server behind them."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def counting_servers(names: list[str]) -> Iterator[tuple[dict[str, int], list[int]]]:
    """One server per name: ({name: port}, the port of every request in order)."""

    class Count(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            seen.append(self.server.server_address[1])
            # One write: a head and a body written apart wait on Nagle and delayed ACKs.
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

        def log_message(self, *args: object) -> None:
            pass

    seen: list[int] = []
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Count) for _ in names]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {n: int(s.server_address[1]) for n, s in zip(names, servers, strict=True)}, seen
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
