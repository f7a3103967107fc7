"""The daemon's own logs: structlog, rendered for people on a TTY and as JSON otherwise.

Stdlib loggers (uvicorn, httpx, watchfiles) go through the same processors, so every
line on stderr has one shape: a dotted event name. A library's prose message becomes the
`library.message` event with the text under `message`.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import TextIO

import structlog
from structlog.typing import Processor

from llamad.common.colour import use_colour
from llamad.daemon.logfile import RotatingStreamHandler

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS["error"] = logging.ERROR
_DOTTED = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")


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
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=use_colour(stream))
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, dotted_event],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.dict_tracebacks if fmt == "json" else _identity,
            renderer,
        ],
    )
    handler = RotatingStreamHandler(stream, max_bytes, backups)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
    # Per-request chatter from the libraries is noise in a daemon's log; uvicorn's startup
    # and shutdown lines are said by control.serving and control.stopped instead.
    for noisy in ("httpx", "httpcore", "uvicorn.access", "uvicorn.error", "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


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
