"""The daemon's log: one dotted event per line, and the events table of docs/operations.md
kept complete."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import Llamad, free_port, write_config

from llamad.daemon.logs import configure

ROOT = Path(__file__).resolve().parents[2]
DOTTED = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
# A structlog call naming its event: `log.info("instance.exited", ...)`, over several lines.
EMITTED = re.compile(
    r"\.(?:debug|info|warning|error|exception|critical)\(\s*\"([a-z0-9_]+\.[a-z0-9_.]+)\""
)
# Emitted by the formatter for other libraries' records, not by a log call of ours.
FROM_THE_FORMATTER = {"library.message"}
QUIETED = ("httpx", "httpcore", "watchfiles")


def documented_events() -> set[str]:
    section = (ROOT / "docs" / "operations.md").read_text().split("\n## Events\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z0-9_.]+)`", row.split("|")[1])}


# An event named for a helper that logs it (`run_retrying(..., event="binary.rollout_failed")`).
# or its default (`event: str = "daemon.service_failed"`).
NAMED = re.compile(r"\bevent(?:: str)? ?= ?\"([a-z0-9_]+\.[a-z0-9_.]+)\"")


def source_events() -> set[str]:
    text = "\n".join(p.read_text() for p in (ROOT / "llamad").rglob("*.py"))
    return set(EMITTED.findall(text)) | set(NAMED.findall(text))


def test_events_table_names_every_event_and_only_those() -> None:
    documented, emitted = documented_events(), source_events()
    assert emitted - documented == set(), "events missing from docs/operations.md's table"
    assert documented - emitted - FROM_THE_FORMATTER == set(), "docs name unknown events"
    assert all(DOTTED.fullmatch(name) for name in documented | emitted)


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers = root.handlers[:]
    levels = {name: logging.getLogger(name).level for name in ("", *QUIETED)}
    configure("info", "json", stream)
    yield stream
    root.handlers[:] = handlers
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    structlog.reset_defaults()


def test_library_prose_becomes_a_dotted_event(json_log: io.StringIO) -> None:
    """A library's chatter is silenced; its warnings keep their text under `message`."""
    logging.getLogger("watchfiles.main").info("%d changes detected", 42)
    logging.getLogger("watchfiles.main").warning("Invalid HTTP request received.")
    structlog.get_logger("llamad.test").info("instance.exited", instance="a")
    lines = [json.loads(ln) for ln in json_log.getvalue().splitlines()]
    assert [(ln["event"], ln.get("message")) for ln in lines] == [
        ("library.message", "Invalid HTTP request received."),
        ("instance.exited", None),
    ]
    assert lines[0]["logger"] == "watchfiles.main"


def test_a_flood_of_one_event_is_one_line_and_costs_little(json_log: io.StringIO) -> None:
    """Repeats within the interval are dropped before structlog's chain makes a record
    of them (a neighbour churning connections makes a refusal each: a record rendered
    and dropped cost ~35 us), the libraries' by the handler; each reason is its own."""
    made = logging.getLogRecordFactory()
    records: list[logging.LogRecord] = []

    def counted(*args: Any, **kwargs: Any) -> logging.LogRecord:
        records.append(made(*args, **kwargs))
        return records[-1]

    log = structlog.get_logger("llamad.test")
    logging.setLogRecordFactory(counted)
    try:
        for _ in range(200):
            log.warning("connection.refused", listener="t", reason="share_evicted_idle")
            logging.getLogger("asyncio").warning("socket.accept() out of system resource")
        log.warning("connection.refused", listener="t", reason="share")
    finally:
        logging.setLogRecordFactory(made)
    lines = [json.loads(ln) for ln in json_log.getvalue().splitlines()]
    assert [(ln["event"], ln.get("reason")) for ln in lines] == [
        ("connection.refused", "share_evicted_idle"),
        ("library.message", None),
        ("connection.refused", "share"),
    ]
    assert len([r for r in records if r.name == "llamad.test"]) < 10  # 200 repeats: none


def test_every_daemon_line_is_a_documented_dotted_event(tmp_path: Path, tiny_model: Path) -> None:
    """A real run, stale socket included: JSON lines only, each named in the events table."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"socket": str(tmp_path / "c.sock"), "state_dir": str(tmp_path / "state")},
    )
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(tmp_path / "c.sock"))  # bound, never listening: a stale socket
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("a")
        d.ctl("restart", "a")
        assert d.stop() == 0
    raw = d.stderr_path.read_text().splitlines()
    events = [json.loads(line) for line in raw]  # every line is JSON
    names = {e["event"] for e in events}
    assert names <= documented_events()
    assert {"control.socket_replaced", "control.serving", "control.stopped"} <= names
    (replaced,) = [e for e in events if e["event"] == "control.socket_replaced"]
    assert replaced["path"] == str(tmp_path / "c.sock")


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test configures, logging is as it was afterwards."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    levels = {name: logging.getLogger(name).level for name in ("", *QUIETED)}
    yield
    root.handlers[:] = handlers
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    structlog.reset_defaults()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def console(stream: io.StringIO) -> str:
    configure("info", "console", stream)
    structlog.get_logger("llamad.test").info("colour.checked", n=1)
    return stream.getvalue()


@pytest.mark.usefixtures("restored")
def test_force_color_colours_console_logs_into_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in console(io.StringIO())


@pytest.mark.usefixtures("restored")
def test_no_color_keeps_a_terminal_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    out = console(Tty())
    assert "colour.checked" in out
    assert "\x1b[" not in out


@pytest.mark.usefixtures("restored")
def test_an_appended_log_file_is_rotated_by_copy_and_truncate(tmp_path: Path) -> None:
    """launchd's StandardErrorPath (opened O_APPEND, never reopened) stays under the size
    limit: copied to .1, .2 and truncated in place, so llamad keeps writing to the file."""
    path = tmp_path / "llamad.err.log"
    with path.open("a", encoding="utf-8") as stream:
        configure("info", "json", stream, max_bytes=2000, backups=2)
        for n in range(200):
            structlog.get_logger("llamad.test").info("rotation.checked", n=n)
    assert path.stat().st_size < 2000 + 200
    backups = sorted(p.name for p in tmp_path.iterdir() if p != path)
    assert backups == ["llamad.err.log.1", "llamad.err.log.2"]
    last = path.read_text().splitlines()[-1]
    assert '"n": 199' in last
    assert not path.read_text().startswith("\0")


@pytest.mark.usefixtures("restored")
def test_a_log_file_not_opened_for_appending_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "llamad.err.log"
    with path.open("w", encoding="utf-8") as stream:
        configure("info", "json", stream, max_bytes=2000, backups=2)
        for n in range(100):
            structlog.get_logger("llamad.test").info("rotation.checked", n=n)
    assert path.stat().st_size > 2000
    assert list(tmp_path.iterdir()) == [path]


def _fail_holding(secret: str) -> None:
    prompt = f"tell me about {secret}"  # a frame local, as a request's body or key is
    raise ValueError(f"boom ({len(prompt)})")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_carry_no_frame_locals(fmt: str, restored: None) -> None:
    """A traceback says where it failed, never with what: no key or prompt in a local."""
    stream = io.StringIO()
    configure("info", fmt, stream)
    secret = "-".join(["sk", "the", "gateway", "key"])  # not in the source a traceback shows
    try:
        _fail_holding(secret)
    except ValueError:
        structlog.get_logger("llamad.test").exception("ollama.request_failed", error="ValueError")
    text = stream.getvalue()
    assert "_fail_holding" in text
    assert "boom (" in text
    assert "sk-the-gateway-key" not in text


def test_request_tracebacks_are_rate_limited_per_kind(json_log: io.StringIO) -> None:
    log = structlog.get_logger("llamad.test")
    for error in ("KeyError", "KeyError", "KeyError", "TypeError"):
        try:
            raise RuntimeError(error)
        except RuntimeError:
            log.exception("ollama.request_failed", method="POST", path="/api/chat", error=error)
    lines = [json.loads(ln) for ln in json_log.getvalue().splitlines()]
    assert [ln["error"] for ln in lines] == ["KeyError", "TypeError"]
