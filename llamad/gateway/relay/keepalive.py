"""Keep-alive bytes for a streaming client whose model is loading.

A load can take minutes, and a proxy between the client and the gateway may cut a
connection that stays silent for long. So once a streamed request has waited `interval`
seconds without an answer, its response starts (200, the stream's content type) and a
keep-alive goes out every `interval` until the answer itself comes:
- SSE (OpenAI, Anthropic, llama.cpp's own routes): a comment line, which every SSE
  reader skips;
- Ollama's NDJSON: an empty chunk of the route's shape, as Ollama itself sends before a
  thinking model's first words. A blank line would not do: ollama-python and Open WebUI
  parse every line as JSON.

The status and headers go out with the first keep-alive, so what follows must fit in
that stream: the answer's own start is dropped, and an error answer (a failed load, a
queue timeout, llama-server refusing the request) becomes the stream's last event, in
the family's shape, instead of a second status. A request answered within `interval`
costs one timer and sends nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from starlette.types import Message, Send

from llamad.gateway.contract.families import family

log = structlog.get_logger("llamad.gateway")

SSE = b"text/event-stream"
NDJSON = b"application/x-ndjson"


@dataclass(frozen=True)
class Beat:
    """How one stream keeps alive: its content type, the keep-alive bytes (built per beat),
    and how an error answer's body becomes the stream's last bytes."""

    content_type: bytes
    line: Callable[[], bytes]
    error: Callable[[bytes], bytes]


def sse_beat(path: str) -> Beat:
    """SSE comments; an error as the family's error event (Anthropic's clients read it by
    its event name, OpenAI's by its data)."""
    event = b"event: error\n" if family(path) == "anthropic" else b""

    def error(body: bytes) -> bytes:
        data = b"".join(b"data: " + line + b"\n" for line in body.splitlines() or [b"{}"])
        return event + data + b"\n"

    return Beat(SSE, lambda: b": keep-alive\n\n", error)


def ndjson_beat(chunk: Callable[[], bytes]) -> Beat:
    """Ollama's NDJSON: `chunk()` is an empty chunk of the route's shape, one line; an error
    is the `{"error": ...}` line Ollama ends a failed stream with."""
    return Beat(NDJSON, chunk, lambda body: b" ".join(body.splitlines()) + b"\n")


class KeepAlive:
    """One request's keep-alives: `arm()` when it starts to wait, `await stop()` before
    its answer, and send that answer through `send`."""

    def __init__(self, send: Send, interval: float) -> None:
        self._send = send
        self.interval = interval
        self._beat: Callable[[], Beat | None] = lambda: None
        self.started = False  # the status went out with the first keep-alive
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._stream: Beat | None = None
        self._failed = False  # the answer's own status was an error
        self._held = b""

    def arm(self, beat: Callable[[], Beat | None]) -> None:
        """Start the clock: after `interval` seconds, `beat()` says how this request's
        stream keeps alive (None: it is no stream, nothing to keep alive)."""
        if self.interval > 0 and self._timer is None and self._task is None:
            self._beat = beat
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._stream = self._beat()
        if self._stream is not None:
            # Awaited by stop(), which every request calls before it answers or ends.
            self._task = asyncio.ensure_future(self._run(self._stream))

    async def _run(self, beat: Beat) -> None:
        headers = [
            (b"content-type", beat.content_type),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self.started = True  # before the await: a cancel mid-send may leave it sent
        with contextlib.suppress(OSError):  # the client left: the guard ends the request
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})
            while True:
                message = {"type": "http.response.body", "body": beat.line(), "more_body": True}
                await self._send(message)
                await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        """No more keep-alives: the answer comes now (or the request is over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled() and (exc := task.exception()) is not None:
                log.error("gateway.task_failed", task="keep-alive", exc_info=exc)

    @property
    def out(self) -> Send:
        """Where the answer goes: straight out when no keep-alive went, else `send`."""
        return self.send if self.started else self._send

    async def send(self, message: Message) -> None:
        """The answer's `send`: as it is until a keep-alive went out; after that, inside
        the stream already started."""
        if not self.started:
            await self._send(message)
            return
        if message["type"] == "http.response.start":
            self._failed = message["status"] >= 400
            return
        if not self._failed:
            await self._send(message)
            return
        self._held += message.get("body", b"")
        if not message.get("more_body", False):
            assert self._stream is not None
            last = self._stream.error(self._held)
            await self._send({"type": "http.response.body", "body": last, "more_body": False})
