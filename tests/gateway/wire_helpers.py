"""HTTP/1.1 spoken by hand on one socket: framing across the requests of one connection,
pipelining and half-closes, which a client library hides."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names lower case; a repeated name keeps its last value
    body: bytes
    names: list[str]  # the header names as written

    def json(self) -> Any:
        return json.loads(self.body)


def post(port: int, path: str, body: bytes | dict[str, Any], *extra: str) -> bytes:
    """A POST's bytes; `extra` are header lines ("Origin: ...")."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def get(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


class Conn:
    """One kept-alive connection, read by hand."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def half_close(self) -> None:
        """Shut the writing side: the server reads EOF after what was sent."""
        self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def head(self) -> tuple[int, dict[str, str], list[str]]:
        """The next final answer's head (a 1xx before it is read and skipped)."""
        status = int(self._line().split(b" ", 2)[1])
        headers: dict[str, str] = {}
        names = []
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            names.append(name.strip())
            headers[name.strip().lower()] = value.strip()
        return self.head() if status < 200 else (status, headers, names)

    def chunk(self) -> bytes | None:
        """The next chunk of a chunked body; None at its end."""
        size = int(self._line().split(b";")[0], 16)
        if size == 0:
            while self._line():  # trailers, then the blank line
                pass
            return None
        data = self._exactly(size)
        assert self._exactly(2) == b"\r\n", "a chunk not ended by CRLF"
        return data

    def reply(self) -> Reply:
        """The next whole answer."""
        status, headers, names = self.head()
        if headers.get("transfer-encoding") == "chunked":
            parts = []
            while (part := self.chunk()) is not None:
                parts.append(part)
            body = b"".join(parts)
        else:
            body = self._exactly(int(headers.get("content-length", "0")))
        return Reply(status, headers, body, names)

    def sse(self) -> tuple[Reply, list[str]]:
        """A whole SSE answer, and its `data:` payloads in order."""
        reply = self.reply()
        assert reply.status == 200, reply.body
        assert reply.headers["content-type"].startswith("text/event-stream")
        text = reply.body.decode()
        return reply, [line[6:] for line in text.split("\n") if line.startswith("data: ")]
