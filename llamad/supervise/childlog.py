"""Each instance's output file, `log_dir/NAME.log`, rotated by size by the stdlib handler.

A log that cannot be written (a directory llamad may not write, a full disk, a file
that turned read-only) must not cost the daemon: opening it is checked before a launch,
where a failure is that instance's error, and a write that fails while the child runs
costs one warning (`instance.log_unwritable`), not a traceback per output line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog

from llamad.common.redact import REDACTED

WARN_INTERVAL_S = 300.0

log = structlog.get_logger("llamad.instance")


class ChildLog:
    """Writes a child's output lines to its own rotating file, with secrets blanked out."""

    def __init__(
        self,
        path: Path,
        max_bytes: int,
        backups: int,
        secrets: Iterable[str] = (),
        instance: str = "",
    ) -> None:
        self.path = path
        self.instance = instance or path.stem
        self._secrets = tuple(s for s in secrets if s)
        self._failing = False
        self._warned_at: float | None = None
        # delay=True: the file is opened at the first line, so a bad log dir is found by
        # `problem()` before a launch rather than raising out of a constructor.
        self._handler = _QuietHandler(
            self._write_failed,
            path,
            maxBytes=max_bytes,
            backupCount=backups,
            encoding="utf-8",
            delay=True,
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        # The file exists from the start (`llamactl logs -f` can follow it at once); if it
        # cannot be made, the launch says why.
        self.problem()

    def problem(self) -> str | None:
        """Why the log file cannot be written now, or None (a launch needs a log)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            return f"cannot write log file {self.path}: {exc.strerror or exc}"
        return None

    def write(self, text: str) -> str:
        """Append a line of the child's output (or several, joined by newlines); returns
        it as written, secrets blanked out, for the child's tail to keep."""
        text = self.redact(text)
        record = logging.LogRecord("llamad.child", logging.INFO, "", 0, text, None, None)
        self._handler.emit(record)
        if self._failing and not self._handler.failed_last:
            self._failing = False
        return text

    def mark(self, text: str) -> None:
        """A line of llamad's own, so `llamactl logs` shows starts and exits in place."""
        self.write(f"--- llamad: {text} ---")

    def redact(self, text: str) -> str:
        """`text` with every secret of this instance blanked out."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def close(self) -> None:
        """Close the file; a later write reopens it."""
        self._handler.close()

    def _write_failed(self, error: BaseException | None) -> None:
        now = time.monotonic()
        if self._failing:
            return
        self._failing = True
        # A log that fails on and off (a disk at its limit) warns once per interval.
        if self._warned_at is None or now - self._warned_at > WARN_INTERVAL_S:
            self._warned_at = now
            log.warning(
                "instance.log_unwritable",
                instance=self.instance,
                path=str(self.path),
                error=str(error),
            )


class _QuietHandler(logging.handlers.RotatingFileHandler):
    """The stdlib handler, reporting a failed write to `on_error` instead of printing a
    traceback to stderr for every line."""

    failed_last = False
    regular = True

    def __init__(
        self, on_error: Callable[[BaseException | None], None], *args: Any, **kwargs: Any
    ) -> None:
        self.on_error = on_error
        super().__init__(*args, **kwargs)

    def emit(self, record: logging.LogRecord) -> None:
        self.failed_last = False
        super().emit(record)

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        # The stdlib's check stats the path twice and formats the record once more, for
        # every record; this one is the size test alone. Its other test, never to rotate
        # a non-regular file (bpo-45401), is made once per open, in _open.
        if self.stream is None:
            self.stream = self._open()
        if self.maxBytes <= 0 or not self.regular:
            return False
        self.stream.seek(0, 2)  # another writer (a truncating logrotate) moves the end
        return bool(self.stream.tell() + len(record.getMessage()) + 1 >= self.maxBytes)

    def _open(self) -> io.TextIOWrapper:
        stream = super()._open()
        self.regular = os.path.isfile(self.baseFilename)
        return stream

    def handleError(self, record: logging.LogRecord) -> None:
        self.failed_last = True
        # A half-open stream after a failed rotation would fail again on every line.
        if self.stream is not None:
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None
        self.on_error(sys.exc_info()[1])
