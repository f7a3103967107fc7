"""Pull progress as Ollama streams it: `{"status", "digest", "total", "completed"}` lines."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Report = Callable[[dict[str, Any]], None]
# Progress lines at most this often per file: a fast local copy would flood the stream.
EVERY_S = 0.1


class PullError(Exception):
    """A pull that cannot go on; the message is one line for the person who asked."""


class Oversize(PullError):
    """A file's server sent more than the size its manifest declared: the download stops
    there (its space was checked for the declared size, not for what a server streams)."""


class PullCancelled(Exception):
    """Everyone who asked for the pull went away before it ended (Ollama stops it then)."""


def status(report: Report, text: str) -> None:
    """A status line with no byte counts (`pulling manifest`, `success`)."""
    report({"status": text})


class FileProgress:
    """Byte counts of one file being downloaded, reported no more often than EVERY_S,
    and held to the size declared for it: told before the bytes are written."""

    def __init__(self, report: Report, digest: str, total: int) -> None:
        self.report, self.digest, self.total = report, digest, total
        self.completed = 0
        self._last = 0.0

    def set(self, completed: int, force: bool = False) -> None:
        """The file has `completed` bytes now; Oversize past the declared total."""
        if completed > self.total:
            raise Oversize(
                f"{self.digest}: the server sent more than the {self.total} bytes declared "
                "for it; the download was stopped there and nothing of it was kept"
            )
        self.completed = completed
        now = time.monotonic()
        if force or now - self._last >= EVERY_S or completed >= self.total:
            self._last = now
            self.report(
                {
                    "status": f"pulling {self.digest.removeprefix('sha256:')[:12]}",
                    "digest": self.digest,
                    "total": self.total,
                    "completed": min(completed, self.total),
                }
            )


def bar_class(progress: FileProgress) -> type:
    """A tqdm stand-in for huggingface_hub's `tqdm_class`: it only counts bytes."""

    class Bar:
        def __init__(self, *args: Any, initial: int = 0, **kwargs: Any) -> None:
            self.n = initial
            progress.set(initial, force=True)

        def update(self, n: int | None = 1) -> None:
            self.n += n or 0
            progress.set(self.n)

        def __enter__(self) -> Bar:
            return self

        def __exit__(self, kind: object, *exc: object) -> None:
            if kind is None:
                progress.set(self.n, force=True)

        def close(self) -> None:
            """Nothing to close."""

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *a, **k: None  # set_description, refresh...: nothing to draw

    return Bar
