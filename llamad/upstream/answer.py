"""An upstream answer read off one pooled connection: its head at once, its body as it
arrives (in pieces, whole, or line by line), and the connection given back or dropped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from llamad.upstream.connection import Connection


class Answer:
    """An upstream answer: status and headers now, the body as it arrives.

    Reading the body raises `Broken` (never `NotAnswered`) when the connection fails
    mid-answer. `close()` must follow in every case.
    """

    def __init__(
        self, conn: Connection, give_back: Callable[[Connection], None], head_only: bool
    ) -> None:
        self._conn, self._give_back = conn, give_back
        self.status = conn.status
        self.headers = conn.headers
        self._head_only = head_only

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, in pieces as large as what has arrived since the last one."""
        if self._head_only:
            return
        while data := await self._conn.read():
            yield data

    async def arrived(self) -> None:
        """Wait until the whole body is in, reading none of it (it stays for `chunks`).
        Only for a body that fits under the connection's HIGH_WATER: past it, reading
        pauses until the body is taken."""
        if not self._head_only:
            await self._conn.arrived()

    async def aread(self) -> bytes:
        """The whole body, once it has all arrived."""
        return b"".join([chunk async for chunk in self.chunks()])

    async def lines(self) -> AsyncIterator[str]:
        """The body's lines as they complete (UTF-8, undecodable bytes replaced), without
        their line ends: SSE's `data:` lines, NDJSON's objects. A last line without an
        end is given too."""
        pending: list[bytes] = []
        async for chunk in self.chunks():
            if b"\n" not in chunk:
                pending.append(chunk)  # joined once its line ends, not chunk by chunk
                continue
            *done, rest = b"".join([*pending, chunk]).split(b"\n")
            pending = [rest]
            for line in done:
                # Split before decoding: a chunk may end inside a multi-byte character.
                yield line.removesuffix(b"\r").decode("utf-8", "replace")
        if last := b"".join(pending):
            yield last.removesuffix(b"\r").decode("utf-8", "replace")

    @property
    def complete(self) -> bool:
        """The whole body has arrived."""
        return self._conn.ended

    def close(self) -> None:
        """Give the connection back when the answer ended cleanly; drop it otherwise, so
        an instance that is still writing (the client left) stops generating."""
        c = self._conn
        # An answer that ends with its connection (no length) is never keep-alive.
        if self.complete and c.keep_alive and not (c.lost or self._head_only):
            self._give_back(c)
        elif c.transport is not None:
            c.transport.close()
