"""A bounded listener: at most N connections, and none may idle before its request.

uvicorn closes keep-alive connections that idle after a response, but a connection that
never sends a request (or sends its headers a byte at a time) is held forever, and each
holds a file descriptor. Enough of them and the daemon's own probes and port checks fail
with EMFILE. This wrapper around uvicorn's HTTP protocol closes a connection that has not
delivered a complete request head within `header_timeout`, and turns away connections
beyond `cap` at once.
"""

from __future__ import annotations

import asyncio

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = structlog.get_logger("llamad.control")

HEADER_TIMEOUT_S = 5.0

# uvicorn on httptools (llhttp, Node's parser) rather than its pure-Python h11, for every
# listener: h11 was about a sixth of the gateway's CPU per relayed request (py-spy).
HttpProtocol = HttpToolsProtocol


def guarded_protocol(
    base: type[HttpProtocol], cap: int, header_timeout: float = HEADER_TIMEOUT_S
) -> type[HttpProtocol]:
    """A subclass of `base` for `uvicorn.Config(http=...)`: capped, with a header deadline."""
    open_now: set[HttpProtocol] = set()

    class GuardedProtocol(base):  # type: ignore[misc,valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _armed_for: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if transport.is_closing():  # refused by the base (another user)
                return
            if len(open_now) >= cap:
                log.warning("control.connection_capped", cap=cap)
                transport.abort()
                return
            open_now.add(self)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Kept alive: the next request head must come within the deadline as well.
            self._arm()

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._armed_for = self.cycle
            self._deadline = self.loop.call_later(header_timeout, self._header_deadline)

        def connection_lost(self, exc: Exception | None) -> None:
            open_now.discard(self)
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _header_deadline(self) -> None:
            # A new request head since arming means a request is being served (a log
            # follower may take hours); otherwise the connection idled or dribbled.
            idle = self.cycle is None or self.cycle.response_complete
            if self.cycle is self._armed_for and idle and not self.transport.is_closing():
                self.transport.abort()

    return GuardedProtocol
