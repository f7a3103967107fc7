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


async def guard(work: Awaitable[None], leaving: Departure | None) -> None:
    """Run `work` in this task; cancel it the moment the client disconnects.

    `leaving` (the listener's `Departure`, `departure(scope)`) is the one way to learn
    it: no task waits in `receive()`. It cancels this task only while `work` runs: the
    request's own task does the work. None (an app served by no listener of ours, as in
    a test): `work` runs to its end."""
    task = asyncio.current_task()
    assert task is not None
    left = over = False

    def gone() -> None:
        nonlocal left
        if over:
            return  # `work` ended first: the cancel would hit whatever this task does next
        left = True
        task.cancel()

    if leaving is not None:
        leaving.watch(gone)
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
        if leaving is not None:
            leaving.unwatch(gone)
