"""The daemon's own logs: structlog, rendered for people on a TTY and as JSON otherwise.

Stdlib loggers (httpx, watchfiles, asyncio) go through the same processors, so every
line on stderr has one shape: a dotted event name. A library's prose message becomes the
`library.message` event with the text under `message`.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import TextIO

import structlog
from structlog.typing import Processor

from llamad.common.colour import use_colour
from llamad.daemon import logformat
from llamad.daemon.logfile import RotatingStreamHandler

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS["error"] = logging.ERROR
_DOTTED = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")

# Our own events that can repeat as fast as something outside hammers us.
RATE_LIMITED = frozenset(
    {
        "probe.not_made",
        "probe.loop_late",
        "daemon.loop_error",
        "instance.internal_error",
        "connection.refused",
        "listener.invalid_request",
        "gateway.unauthorized",
        # A request that fails in our code fails the same way for every request like it:
        # one traceback per kind of error per interval, not one per request.
        "ollama.request_failed",
        "control.request_failed",
        "listener.app_failed",
    }
)
REPEAT_INTERVAL_S = 10.0


def configure(
    level: str = "info",
    fmt: str = "auto",
    stream: TextIO | None = None,
    max_bytes: int = 10 * 1024 * 1024,
    backups: int = 3,
) -> None:
    """Route structlog and stdlib logging to `stream` (stderr): console or JSON lines.
    When `stream` is a file opened for appending (launchd's StandardErrorPath), it is kept
    under `max_bytes` with `backups` copies (logfile.py)."""
    stream = stream or sys.stderr
    fmt = logformat.resolve(fmt, stream)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # One decision for repeats: made first in structlog's chain for our own events, so a
    # dropped one costs no time stamp, record or handler (a neighbour churning thousands
    # of connections a second makes a `connection.refused` each), and by the handler's
    # filter for the libraries' records.
    repeats = RepeatFilter()
    renderer: Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(
            colors=use_colour(stream), exception_formatter=_console_tracebacks()
        )
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            repeats.drop_repeat,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, dotted_event],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _dict_tracebacks() if fmt == "json" else _identity,
            renderer,
        ],
    )
    handler = RotatingStreamHandler(stream, max_bytes, backups)
    handler.setFormatter(formatter)
    handler.addFilter(repeats)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
    # Per-request chatter from the libraries is noise in a daemon's log.
    for noisy in ("httpx", "httpcore", "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _dict_tracebacks() -> Processor:
    # structlog's own `dict_tracebacks` keeps every frame's locals: a request's key, its
    # prompt, the gateway's keys. A traceback says where, never with what.
    from structlog.tracebacks import ExceptionDictTransformer

    return structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))


def _console_tracebacks() -> structlog.typing.ExceptionRenderer:
    # rich's tracebacks show locals by default, better_exceptions always: neither, here.
    if getattr(structlog.dev, "rich", None) is not None:
        return structlog.dev.RichTracebackFormatter(show_locals=False)
    return structlog.dev.plain_traceback


def dotted_event(
    logger: object, name: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """A stdlib record's prose becomes `message` under the event `library.message`."""
    text = str(event.get("event", ""))
    if not _DOTTED.fullmatch(text):
        event["message"], event["event"] = text, "library.message"
    return event


def _identity(
    logger: object, name: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    return event


class RepeatFilter(logging.Filter):
    """One line per kind per interval, the next one carrying how many were dropped.

    A kind is a library's message template (asyncio's accept errors) or one of our
    RATE_LIMITED events for one instance or reason; a flood of garbage on the TCP port
    or of EMFILE must not fill the disk with stderr.
    """

    def __init__(self, interval: float = REPEAT_INTERVAL_S) -> None:
        super().__init__()
        self.interval = interval
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def drop_repeat(
        self, logger: object, name: str, event: structlog.typing.EventDict
    ) -> structlog.typing.EventDict:
        """structlog's processor for our own events: a repeat within the interval is
        dropped, the next one carries how many were."""
        kind = _event_kind(event)
        if kind is not None:
            dropped = self._seen(kind)
            if dropped is None:
                raise structlog.DropEvent
            if dropped:
                event["repeated"] = dropped
        return event

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, dict):
            return True  # a structlog event: `drop_repeat` has decided
        if record.levelno < logging.WARNING:
            return True
        dropped = self._seen((record.name, str(record.msg)))
        if dropped is None:
            return False
        if dropped:
            record.msg = f"{record.getMessage()} ({dropped} more like this suppressed)"
            record.args = None
        return True

    def _seen(self, kind: tuple[str, str]) -> int | None:
        """None: a repeat within the interval, dropped; else how many were dropped
        since the last one let through."""
        now = time.monotonic()
        last, dropped = self._last.get(kind, (-self.interval, 0))
        if now - last < self.interval:
            self._last[kind] = (last, dropped + 1)
            return None
        self._last[kind] = (now, 0)
        return dropped


def _event_kind(event: structlog.typing.EventDict) -> tuple[str, str] | None:
    name = event.get("event")
    if name not in RATE_LIMITED:
        return None
    # Per instance, or per reason of a refusal (a flood of one kind hides no other).
    return (name, str(event.get("instance", event.get("reason", event.get("error", "")))))
