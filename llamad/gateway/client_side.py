"""A request's side of the client: its body, read whole, and its leaving, which cancels
the work done for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from starlette.types import Receive


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


async def guard(receive: Receive, work: Awaitable[None]) -> None:
    """Run `work` in this task; cancel it the moment the client disconnects.

    A watcher task reads for the disconnect and cancels this one, only while `work`
    runs: the request's own task does the work, without a second task to start, wait
    for and collect."""
    task = asyncio.current_task()
    assert task is not None
    left = over = False

    def gone(watcher: asyncio.Future[None]) -> None:
        nonlocal left
        if over or watcher.cancelled():
            return  # `work` ended first: the cancel would hit whatever this task does next
        watcher.exception()  # a failed read: gone all the same
        left = True
        task.cancel()

    watcher = asyncio.ensure_future(until_disconnect(receive))
    watcher.add_done_callback(gone)
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
        watcher.cancel()
