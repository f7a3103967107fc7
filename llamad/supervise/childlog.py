"""Each instance's output file, `log_dir/NAME.log`, rotated by size (`rotating.py`).

A log that cannot be written (a directory llamad may not write, a full disk, a file
that turned read-only) must not cost the daemon: opening it is checked before a launch,
where a failure is that instance's error, and a write that fails while the child runs
costs one warning (`instance.log_unwritable`), not a traceback per output line.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path

import structlog

from llamad.common.redact import REDACTED
from llamad.supervise.rotating import RotatingFile

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
        # Opened at the first line, so a bad log dir is found by `problem()` before a
        # launch rather than raising out of a constructor.
        self._file = RotatingFile(path, max_bytes, backups)
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
        try:
            self._file.write(text)
        except OSError as exc:
            self._write_failed(exc)
        else:
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
        with contextlib.suppress(OSError):
            self._file.close()

    def _write_failed(self, error: OSError) -> None:
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
