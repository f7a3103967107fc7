"""One client connection, as asyncio sees it: admitted or turned away, its bytes read
into its requests (`pipeline.py`), its end.

A client that half-closes after whole requests (EOF once its last body is in) is
answered, then the connection closes. TCP shows a half-close and a close alike, so a
100 Continue goes first when no answer has begun: a client that had closed answers it
with a reset (`Flow.watch_reset`), and its request is cancelled as it would have been.
"""

from __future__ import annotations

import asyncio

import structlog

from llamad.listener.answers import CONTINUE, INVALID, bad_request
from llamad.listener.flow import Flow
from llamad.listener.limits import Refusal
from llamad.listener.pipeline import Pipeline, Site
from llamad.listener.reader import Invalid, Upgraded
from llamad.listener.table import LOOPBACK, share_key

log = structlog.get_logger("llamad.listener")


class Connection(asyncio.Protocol):
    """One connection of a listener."""

    transport: asyncio.Transport
    flow: Flow
    requests: Pipeline | None = None  # None until admitted

    def __init__(self, site: Site, loop: asyncio.AbstractEventLoop) -> None:
        self.site, self.loop = site, loop
        self._tls = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.flow = Flow(self.transport, self.loop, self._due, self.transport.abort)
        if not self.site.accepts(transport.get_extra_info("socket")):
            transport.close()  # before any byte is read
            return
        limits = self.site.limits()
        peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        client = (peer[0], peer[1]) if isinstance(peer, tuple) else None
        host = client[0] if client else None
        self._tls = transport.get_extra_info("sslcontext") is not None
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "scheme": "https" if self._tls else "http", "root_path": "", "client": client,
            "server": (local[0], local[1]) if isinstance(local, tuple) else None,
        }  # fmt: skip
        key = share_key(host)
        requests = Pipeline(self.site, self.transport, self.flow, scope, key, limits)
        if not self.site.table.admit(requests, limits, limits.trust_loopback and key == LOOPBACK):
            self.transport.abort()
            return
        self.requests = requests
        self.site.opened(self)
        self.flow.arm(limits.head_timeout)

    def data_received(self, data: bytes) -> None:
        requests = self.requests
        if requests is None or requests.done:
            return  # refused: what the client still sends is dropped unread
        try:
            requests.reader.feed(data)
        except Refusal as why:
            requests.refuse(why)
        except Invalid:
            log.warning("listener.invalid_request", message=INVALID, client=requests.key)
            requests.stop(bad_request())
        except Upgraded:  # answered as a plain request; what follows is not HTTP to us
            requests.close_after_last()

    def eof_received(self) -> bool:
        requests = self.requests
        if requests is None or self._tls or requests.done or requests.phase != "waiting":
            return False  # nothing owed, a request cut short, or TLS (which closes whole)
        first = requests.pending[0]
        if first.written:
            return False  # the client went in the middle of an answer
        requests.close_after_last()
        if first.scope["http_version"] == "1.1":
            self.transport.write(CONTINUE)
            self.flow.watch_reset(lambda: not requests.pending or requests.pending[0].written)
        return True  # answered, then closed

    def connection_lost(self, exc: Exception | None) -> None:
        self.flow.lost()
        if self.requests is not None:
            self.site.table.remove(self.requests)
            self.requests.lost()
        self.site.lost(self)

    def pause_writing(self) -> None:
        self.flow.pause_writing()

    def resume_writing(self) -> None:
        self.flow.resume_writing()

    def shutdown(self) -> None:
        """The listener stops (see `Pipeline.shutdown`)."""
        if self.requests is not None:
            self.requests.shutdown()

    def _due(self) -> None:
        if self.requests is not None:
            self.requests.due()
