"""The daemon's requests to its own children (probes, metrics scrapes, the slot files),
each waiting for its whole answer.

They go through the one upstream client (`llamad.upstream.pool`), the gateway's relay's:
kept-alive connections per server shared by every probe, and answers read with the same
bounds (an answer's head in size and time). A probe is a small GET on this host: httpx's
pool cost several times its CPU, and loading httpcore imports every async library and
HTTP/2 stack installed beside it (trio, h2).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from llamad.upstream.connection import NotAnswered
from llamad.upstream.pool import Pool, encode


@dataclass(frozen=True)
class Reply:
    """A whole answer."""

    status: int
    body: bytes


@lru_cache(maxsize=1024)
def _split(url: str) -> tuple[str, str]:
    """An `http://` URL's server (`http://host:port`) and its target (path and query)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"http://{netloc}", path


class Client:
    """Requests to the daemon's children; each waits for its whole answer.

    Errors are OSErrors: ConnectionRefusedError, ConnectionError for a connection closed
    or an unreadable answer, TimeoutError past `timeout` (connect, write and read alike).
    """

    def __init__(self, pool: Pool | None = None) -> None:
        self._pool = pool or Pool()

    async def request(
        self,
        method: str,
        url: str,
        timeout: float,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request and its whole answer (a `body` goes as JSON)."""
        base, target = _split(url)
        fields = dict(headers or {})
        if body is not None:
            fields["Content-Type"] = "application/json"
        async with asyncio.timeout(timeout):
            try:
                answer = await self._pool.request(method, base, target, encode(fields), body)
            except NotAnswered as exc:
                if not exc.sent and isinstance(exc.__cause__, ConnectionRefusedError):
                    raise exc.__cause__ from None  # what a probe of a stopped server says
                raise
            try:
                return Reply(answer.status, await answer.aread())
            finally:
                answer.close()

    def close(self) -> None:
        """Close every kept connection."""
        self._pool.close_idle()
