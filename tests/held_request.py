"""A completion held in flight for as long as a test wants, whatever the machine's speed,
against the real llama-server: streamed (SSE) or whole (one JSON body).

Each token comes with the probabilities of the whole (256-token) vocabulary: 16 KB of
JSON a token, 6.5 MB in all. Between the gateway and a client that stops reading, the
kernel holds at most the gateway's send buffer (4 MB at most, tcp_wmem) and the client's
receive buffer (fixed here, so it does not grow): the relay stays in flight until the
test reads on. Generating it takes 2 s on a quiet machine, 20 s on a busy one.
"""

from __future__ import annotations

import json
import socket
import threading

import httpx

TOKENS = 400
LOGPROBS = 256
_RCVBUF = [(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)]


class Held(threading.Thread):
    """A completion to `model` at gateway `base` that reads its first chunk, then waits
    for `go` before reading the rest. `stream=False` asks for the whole answer at once."""

    def __init__(self, base: str, model: str, stream: bool = True) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.stream = f"{base}/v1/completions", model, stream
        self.first, self.go = threading.Event(), threading.Event()
        self.lines: list[str] = []
        self.body = b""
        self.status: int | None = None
        self.error: httpx.HTTPError | None = None

    def run(self) -> None:
        # A stream the daemon cut (a test that stops it mid-stream) is an outcome the test
        # reads (`intact`, `error`), not an exception out of the thread.
        try:
            self._read()
        except httpx.HTTPError as exc:
            self.error = exc

    def _read(self) -> None:
        body = {"model": self.model, "prompt": "hi", "max_tokens": TOKENS, "stream": self.stream}
        body |= {"ignore_eos": True, "logprobs": LOGPROBS}
        transport = httpx.HTTPTransport(socket_options=_RCVBUF)
        with (
            httpx.Client(transport=transport, timeout=90) as client,
            client.stream("POST", self.url, json=body) as resp,
        ):
            self.status = resp.status_code
            chunks = resp.iter_lines() if self.stream else resp.iter_bytes()
            for chunk in chunks:
                if isinstance(chunk, str):
                    if chunk:
                        self.lines.append(chunk)
                else:
                    self.body += chunk
                self.first.set()
                if not self.go.wait(90):
                    return

    def intact(self) -> bool:
        """Every token came: for a stream, the final chunk then [DONE]; whole, the body."""
        if not self.stream:
            try:
                return bool(json.loads(self.body)["usage"]["completion_tokens"] == TOKENS)
            except (ValueError, KeyError):
                return False
        if len(self.lines) < 2 or self.lines[-1] != "data: [DONE]":
            return False
        final = json.loads(self.lines[-2].removeprefix("data: "))
        return bool(final["usage"]["completion_tokens"] == TOKENS)
