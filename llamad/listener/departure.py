"""A request's client leaving, told by the listener that sees its connection close: the
one way to learn that a client left.

The listener (`connection.py`) puts one in each request's ASGI scope under `DEPARTURE`;
`gateway/access/client_side.guard` and the log follower (`api/logstream.py`) watch it,
so no task has to sit in the ASGI `receive()` for the disconnect. `receive()` still
answers `http.disconnect`, as ASGI asks, read from the same `Departure`
(`Exchange.gone`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

# The scope key a listener that sees its connections close puts the `Departure` under.
DEPARTURE = "llamad.departure"


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


def departure(scope: Mapping[str, object]) -> Departure | None:
    """The request's `Departure`, when its listener gives one."""
    found = scope.get(DEPARTURE)
    return found if isinstance(found, Departure) else None
