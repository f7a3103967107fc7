"""The daemon's console logs honour NO_COLOR and FORCE_COLOR as structlog's default does."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
import structlog

from llamad.daemon import logs


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def rendered(stream: io.StringIO) -> str:
    logs.configure("info", "console", stream)
    structlog.get_logger("llamad.test").info("colour.checked", n=1)
    return stream.getvalue()


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def test_force_color_colours_console_logs_into_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in rendered(io.StringIO())


def test_no_color_keeps_a_terminal_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    out = rendered(Tty())
    assert "colour.checked" in out
    assert "\x1b[" not in out


def test_an_appended_log_file_is_rotated_by_copy_and_truncate(tmp_path: Path) -> None:
    """launchd's StandardErrorPath (opened O_APPEND, never reopened) stays under the size
    limit: copied to .1, .2 and truncated in place, so llamad keeps writing to the file."""
    path = tmp_path / "llamad.err.log"
    with path.open("a", encoding="utf-8") as stream:
        logs.configure("info", "json", stream, max_bytes=2000, backups=2)
        for n in range(200):
            structlog.get_logger("llamad.test").info("rotation.checked", n=n)
    assert path.stat().st_size < 2000 + 200
    backups = sorted(p.name for p in tmp_path.iterdir() if p != path)
    assert backups == ["llamad.err.log.1", "llamad.err.log.2"]
    last = path.read_text().splitlines()[-1]
    assert '"n": 199' in last
    assert not path.read_text().startswith("\0")


def test_a_log_file_not_opened_for_appending_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "llamad.err.log"
    with path.open("w", encoding="utf-8") as stream:
        logs.configure("info", "json", stream, max_bytes=2000, backups=2)
        for n in range(100):
            structlog.get_logger("llamad.test").info("rotation.checked", n=n)
    assert path.stat().st_size > 2000
    assert list(tmp_path.iterdir()) == [path]
