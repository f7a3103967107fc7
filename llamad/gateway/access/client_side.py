"""A request's side of the client: its body, read whole, and its leaving, which cancels
the work done for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from starlette.types import Receive

from llamad.listener.departure import Departure


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
