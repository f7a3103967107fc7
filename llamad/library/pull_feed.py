"""One pull's lines as its followers see them, kept bounded: the latest line for each file
(its progress) and for each status, the last line when it ends, in the order they were
last said. A follower who comes late gets where every file stands, not every step of it;
one who lags behind gets the newest line of each file it missed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

Event = dict[str, Any]
_END = "\0end"  # the last line's key: no status or digest is spelled so


class Pull:
    """One pull: its lines so far (followers replay them) and whether it has ended."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False
        # Set on the loop once no follower is left; the download's thread reads it.
        self.cancelled = threading.Event()
        self._followers = 0
        self._wake = asyncio.Event()
        self._said = 0  # lines said so far: each line's place in the order
        # A file's digest, or a status's text -> (its place, its newest line).
        self._latest: dict[str, tuple[int, Event]] = {}
        self._files: dict[str, tuple[int, int]] = {}  # digest -> (completed, total)

    @property
    def events(self) -> list[Event]:
        """The lines a follower who starts now is given, in order."""
        return [e for _, e in sorted(self._latest.values(), key=lambda x: x[0])]

    def progress(self) -> tuple[int, int]:
        """Bytes (completed, total) of the files started so far, for a 503 `downloading`."""
        return sum(c for c, _ in self._files.values()), sum(t for _, t in self._files.values())

    def publish(self, event: Event, end: bool = False) -> None:
        """Add a line for every follower (on the loop's thread)."""
        if "digest" in event and event.get("total"):
            self._files[str(event["digest"])] = (int(event["completed"]), int(event["total"]))
        key = _END if end else str(event.get("digest") or event.get("status"))
        self._said += 1
        self._latest.pop(key, None)  # said again: it moves to the end
        self._latest[key] = (self._said, event)
        self.done = self.done or end
        self._wake.set()
        self._wake = asyncio.Event()

    async def follow(self) -> AsyncIterator[Event]:
        """Every line from the first, until the last (`success` or `error`). When the
        last follower leaves before the end, the pull stops, as Ollama's does when its
        client goes (Open WebUI's Cancel, a Ctrl-C): a partial blob stays to resume."""
        self._followers += 1
        try:
            seen = 0
            while True:
                wake = self._wake
                fresh = sorted((x for x in self._latest.values() if x[0] > seen), key=_place)
                for place, event in fresh:
                    seen = place
                    yield event
                if self.done and seen == self._said:
                    return
                if not fresh:
                    await wake.wait()
        finally:
            self._followers -= 1
            if not self._followers and not self.done:
                self.cancelled.set()


def _place(item: tuple[int, Event]) -> int:
    return item[0]
