"""Each instance's output file, `log_dir/NAME.log`, rotated by size by the stdlib handler."""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Iterable
from pathlib import Path

REDACTED = "[redacted]"


class ChildLog:
    """Writes a child's output lines to its own rotating file, with secrets blanked out."""

    def __init__(
        self, path: Path, max_bytes: int, backups: int, secrets: Iterable[str] = ()
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = path
        self._secrets = tuple(s for s in secrets if s)
        self._handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def write(self, line: str) -> None:
        """Append one line of the child's output."""
        record = logging.LogRecord(
            "llamad.child", logging.INFO, "", 0, self.redact(line), None, None
        )
        self._handler.emit(record)

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
