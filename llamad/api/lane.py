"""A lane past ASGI for the requests that make most of a listener's traffic.

Through uvicorn, every request builds a cycle and its task, passes each middleware, and
has every header of its answer checked against two patterns; for a gateway relaying a
one-token completion, that is most of the CPU it spends. A `Lane` may take a POST at
the end of its head: its body is then read here, and once whole the lane either serves
it, writing the answer through a `LaneCycle` straight onto the connection, or gives it
back, and the app gets it as if it had just arrived. Every limit of the guard
(`connguard.py`) holds for a request on the lane as for any other; only the app is
passed by.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Coroutine
from typing import Any, Protocol

import structlog
from uvicorn.protocols.http.flow_control import FlowControl

from llamad.api.lane_cycle import LaneCycle
from llamad.common.lanes import Headers, LaneRequest

log = structlog.get_logger("llamad.api")


class Lane(Protocol):
    """What serves requests past the app."""

    def offer(
        self, path: str, headers: Headers, server: tuple[str, int] | None, client: str | None
    ) -> bool:
        """At the end of a POST's head (from `client`, to the listener at `server`):
        whether the lane wants to read its body."""
        ...

    def take(self, request: LaneRequest, answer: LaneCycle) -> Coroutine[Any, Any, None] | None:
        """Serve `request` through `answer` (the coroutine that does, run as its own
        task), or None to give it back to the app. Whatever the coroutine holds must also
        be let go by a callback in `answer.ended`: a task cancelled before it starts
        never runs its coroutine's `finally`."""
        ...


def laned(guarded: type[Any], lane: Lane) -> type[Any]:
    """A subclass of the guarded protocol `guarded` (`connguard.guarded_protocol`) that
    offers each HTTP/1.1 POST to `lane` when no other request of its connection is
    being served."""

    class LanedProtocol(guarded):  # type: ignore[misc]
        _laned: LaneCycle | None = None  # the request whose body the lane is reading
        _serving: LaneCycle | None = None  # the request the lane's task serves
        # The lane's request's body so far: one buffer, so that a body in many tiny pieces
        # does not cost an object per piece.
        _body_read: bytearray
        _head_at = 0.0  # perf_counter when the lane took its head

        def on_headers_complete(self) -> None:
            target = self._offered()
            if target is None:
                super().on_headers_complete()
                return
            self._head_ended()
            keep = self.parser.should_keep_alive()
            flow: FlowControl = self.flow
            # Where uvicorn's cycle would be: a request pipelined behind it waits its turn.
            self.cycle = self._laned = LaneCycle(
                self.transport, flow, self.server_state.default_headers, keep,
                self.on_response_complete, self.loop,
            )  # fmt: skip
            self._target, self._body_read, self._head_at = target, bytearray(), time.perf_counter()

        def _offered(self) -> tuple[str, bytes] | None:
            if self.parser.get_method() != b"POST" or self.expect_100_continue:
                return None
            if self.pipeline or not (self.cycle is None or self.cycle.response_complete):
                return None
            if self.parser.get_http_version() != "1.1" or self.parser.should_upgrade():
                return None
            raw, _, query = self.url.partition(b"?")
            if b"%" in raw or b"#" in query or not raw.startswith(b"/"):
                return None  # uvicorn's own reading of such a target is the one to keep
            try:
                path = raw.decode("ascii")
            except UnicodeDecodeError:
                return None
            client = self.client[0] if self.client else None
            try:
                offered = lane.offer(path, self.headers, self.server, client)
            except Exception:  # a bug of the lane's: the app serves the request
                log.exception("lane.offer_failed", path=path)
                return None
            return (path, query) if offered else None

        def connection_lost(self, exc: Exception | None) -> None:
            serving = self._serving
            super().connection_lost(exc)
            # uvicorn tells only `self.cycle`, which a request pipelined behind this one
            # has taken over.
            if serving is not None:
                serving.lost()

        def on_body(self, body: bytes) -> None:
            if self._laned is None:
                super().on_body(body)
                return
            self._count_body(body)
            self._body_read += body

        def on_message_complete(self) -> None:
            cycle = self._laned
            if cycle is None:
                super().on_message_complete()
                return
            self._laned = None
            body, self._body_read = bytes(self._body_read), bytearray()
            self._body_ended()
            host = self.client[0] if self.client else None
            path, query = self._target
            request = LaneRequest(path, query, self.headers, host, body, self._head_at)
            try:
                work = lane.take(request, cycle)
            except Exception:  # a bug of the lane's: the app serves the request
                log.exception("lane.take_failed", path=path)
                work = None
            if work is None:
                self.cycle = None  # type: ignore[assignment]  # uvicorn's: no cycle yet
                self._replay(body)
                if not cycle.keep_alive:
                    # A graceful shutdown began while the lane read the body: uvicorn's
                    # cycle, new, must say close as well.
                    self.shutdown()
                return
            task = self.loop.create_task(work)
            cycle.run(task)
            self._serving = cycle
            task.add_done_callback(functools.partial(self._lane_done, cycle))
            self.tasks.add(task)

        def _lane_done(self, cycle: LaneCycle, task: asyncio.Task[None]) -> None:
            self.tasks.discard(task)
            if self._serving is cycle:
                self._serving = None
            if not task.cancelled() and (exc := task.exception()) is not None:
                log.error("lane.failed", path=self._target[0], exc_info=exc)
            cycle.finish()
            if not cycle.response_complete and not self.transport.is_closing():
                # Broken off: a client must not read half an answer as the whole.
                self.transport.close()

    return LanedProtocol
