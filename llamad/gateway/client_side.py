"""A request's side of the client: its body, read whole, and its leaving, which cancels
the work done for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope

# The scope key under which a listener that sees its connections close (the guarded
# protocol, `api/connguard.py`) puts the request's `Departure`.
DEPARTURE = "llamad.departure"


class ClientGone(Exception):
    """The client disconnected before its request was read."""


async def read_body(receive: Receive) -> bytes:
    """The whole request body."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


class Departure:
    """One request's client leaving, told by its listener to whoever watches for it: no
    task has to sit in `receive()` for the disconnect."""

    def __init__(self, resume: Callable[[], None]) -> None:
        # Reading resumes while a request is watched, as a `receive()` would, so that a
        # pipelining client that closes is seen closing.
        self._resume = resume
        self.gone = False
        self._watchers: list[Callable[[], None]] = []

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the client has gone (soon, if it has already)."""
        if self.gone:
            asyncio.get_running_loop().call_soon(callback)
            return
        self._watchers.append(callback)
        self._resume()

    def unwatch(self, callback: Callable[[], None]) -> None:
        """No more calls to `callback`."""
        if callback in self._watchers:
            self._watchers.remove(callback)

    def leave(self) -> None:
        """The client has gone (its connection closed, or the listener refused it)."""
        if self.gone:
            return
        self.gone = True
        watchers, self._watchers = self._watchers, []
        for callback in watchers:
            callback()


def departure(scope: Scope) -> Departure | None:
    """The request's `Departure`, when its listener gives one."""
    found = scope.get(DEPARTURE)
    return found if isinstance(found, Departure) else None


async def until_disconnect(receive: Receive) -> None:
    """Return when the client has gone (the body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def guard(receive: Receive, work: Awaitable[None], leaving: Departure | None = None) -> None:
    """Run `work` in this task; cancel it the moment the client disconnects.

    `leaving` (the listener's `Departure`) tells of the disconnect; without one, a
    watcher task reads for it. Either cancels this task only while `work` runs: the
    request's own task does the work."""
    task = asyncio.current_task()
    assert task is not None
    left = over = False

    def gone() -> None:
        nonlocal left
        if over:
            return  # `work` ended first: the cancel would hit whatever this task does next
        left = True
        task.cancel()

    def read_out(watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled():
            watcher.exception()  # a failed read: gone all the same
            gone()

    watcher: asyncio.Future[None] | None = None
    if leaving is not None:
        leaving.watch(gone)
    else:
        watcher = asyncio.ensure_future(until_disconnect(receive))
        watcher.add_done_callback(read_out)
    try:
        await work
    except asyncio.CancelledError:
        if not left or task.uncancel() > 0:
            raise  # cancelled from outside (a shutdown), not by the client leaving
    else:
        if left:
            task.uncancel()  # `work` ended on its own after all
    finally:
        over = True
        if watcher is not None:
            watcher.cancel()
        if leaving is not None:
            leaving.unwatch(gone)
