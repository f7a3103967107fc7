"""Hostile and merely buggy clients for the limits tests: raw sockets that send what they
like from the source address they choose, and the daemon's RSS."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from typing import Any

import httpx
import psutil


def connect(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    """A TCP connection to 127.0.0.1:`port` from `source` (another loopback address is
    another client)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout, (source, 0))
    sock.settimeout(timeout)
    return sock


def head(path: str, *lines: str, method: str = "POST") -> bytes:
    """A request head: `lines` are header lines."""
    text = "".join(line + "\r\n" for line in (f"{method} {path} HTTP/1.1", "Host: x", *lines))
    return (text + "\r\n").encode()


def read_answer(sock: socket.socket, timeout: float = 10.0) -> tuple[int, Any]:
    """The status and JSON body of the one answer on `sock` (read until it closes or the
    body is complete); (0, None) when the connection closed without one."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
        top, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(h.split(b":")[1])
                for h in top.split(b"\r\n")
                if h.lower().startswith(b"content-length:")
            ),
            None,
        )
        if length is not None and len(body) >= length:
            break
    if not data.startswith(b"HTTP/1.1 "):
        return 0, None
    top, _, body = data.partition(b"\r\n\r\n")
    return int(top.split()[1]), json.loads(body) if body else None


class Sender:
    """Sends `piece` on `sock` again and again from a thread (every `pause` seconds) until
    stopped, `seconds` have passed, or the peer cuts it off."""

    def __init__(
        self, sock: socket.socket, piece: bytes, pause: float = 0.0, seconds: float = 15.0
    ):
        self.sock, self.piece, self.pause, self.seconds = sock, piece, pause, seconds
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sender:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)

    def _run(self) -> None:
        t0 = time.monotonic()
        with contextlib.suppress(OSError):
            while not self.stop.is_set() and time.monotonic() - t0 < self.seconds:
                self.sock.sendall(self.piece)
                if self.pause:
                    self.stop.wait(self.pause)


def client(source: str) -> httpx.Client:
    """An HTTP client whose connections come from `source`."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=10)


def rss(pid: int) -> int:
    """Resident memory of process `pid`, bytes."""
    return int(psutil.Process(pid).memory_info().rss)
