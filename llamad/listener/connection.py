"""One client connection, as asyncio sees it: admitted or turned away, its bytes read
into its requests (`pipeline.py`), its end.

An EOF from the client is its leaving, as uvicorn and nginx (for a proxied request)
take it: TCP shows a half-close and a close alike, and a client that closed must not
keep a model busy. Its requests see it gone at once, and the connection closes.
"""

from __future__ import annotations

import asyncio

import structlog

from llamad.listener.answers import INVALID, bad_request
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

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.site.accepts(transport):
            transport.close()  # before any byte is read
            return
        limits = self.site.limits()
        peer = transport.get_extra_info("peername")
        client = (peer[0], peer[1]) if isinstance(peer, tuple) else None
        key = share_key(client[0] if client else None)
        # Room first: a connection turned away costs no scope, flow, pipeline or parser.
        if not self.site.table.room(key, limits, limits.trust_loopback and key == LOOPBACK):
            self.transport.abort()
            return
        local = transport.get_extra_info("sockname")
        tls = transport.get_extra_info("sslcontext") is not None
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "scheme": "https" if tls else "http", "root_path": "", "client": client,
            "server": (local[0], local[1]) if isinstance(local, tuple) else None,
        }  # fmt: skip
        self.flow = Flow(
            self.transport, self.loop, self._due, self.transport.abort, limits.send_timeout
        )
        self.requests = Pipeline(self.site, self.transport, self.flow, scope, key, limits)
        self.site.table.add(self.requests)
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
        if self.requests is not None:
            self.requests.lost()  # before anything more is written to the closing socket
        return False  # asyncio closes the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.requests is not None:
            self.flow.lost()
            self.site.table.remove(self.requests)
            self.requests.release()
        self.site.lost(self)

    def pause_writing(self) -> None:
        if self.requests is not None:  # else turned away: nothing was written
            self.flow.pause_writing()

    def resume_writing(self) -> None:
        if self.requests is not None:
            self.flow.resume_writing()

    def shutdown(self) -> None:
        """The listener stops (see `Pipeline.shutdown`)."""
        if self.requests is not None:
            self.requests.shutdown()

    def _due(self) -> None:
        if self.requests is not None:
            self.requests.due()
