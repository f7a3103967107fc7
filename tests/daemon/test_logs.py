"""The daemon's console logs honour NO_COLOR and FORCE_COLOR as structlog's default does."""

from __future__ import annotations

import io
import logging

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
