"""What a listener admits from a stranger, and how it says no.

Each listener (the control socket, the remote control port, the gateway) holds its
limits in a `Limits`; its connections (`connection.py`) apply them before the app, and
so before any key is checked. A refusal is an HTTP answer in the API family's shape
(`Shape`), a line in the log and a count in the metrics (`Refusals`), never the body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from llamad.common.framing import MAX_HEAD, MAX_HEADERS

log = structlog.get_logger("llamad.listener")

HEAD_TIMEOUT_S = 5.0
# Whole request, head and body; a big image over a slow link is the case to fit.
REQUEST_TIMEOUT_S = 60.0
# nginx's send_timeout: how long an answer's writes may make no progress.
SEND_TIMEOUT_S = 60.0
SHARE = 0.25


@dataclass(frozen=True)
class Limits:
    """One listener's limits; read again for every connection and request (reloads)."""

    max_head: int = MAX_HEAD  # bytes of request line and headers
    max_headers: int = MAX_HEADERS
    head_timeout: float = HEAD_TIMEOUT_S  # for a request head, and for an idle connection
    request_timeout: float = REQUEST_TIMEOUT_S  # head and body, from the head's first byte
    max_body: int | None = None  # bytes; None: unbounded here (the app bounds it)
    send_timeout: float = SEND_TIMEOUT_S  # an answer whose writes stall this long is cut
    share: float = SHARE  # of the connection cap, per client address
    trust_loopback: bool = False  # loopback clients may take more than their share


# The control API's bodies are a few hundred bytes at most.
CONTROL = Limits(max_body=1024 * 1024, request_timeout=10.0)

# (path, status, code, message) -> the JSON body of a refusal.
Shape = Callable[[str, int, str, str], bytes]
# (reason, client address) -> None: logs and counts one refusal.
Refused = Callable[[str, str | None], None]


def control_shape(path: str, status: int, code: str, message: str) -> bytes:
    """The control API's error shape, `{"error": {"code", "message"}}`."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


class Refusal(Exception):
    """A request refused before it reaches the app: `status`, `reason` (the metric's
    label and the event's), and the message for the client."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def head_too_large(limits: Limits) -> Refusal:
    """431: the head is past `max_head` bytes or `max_headers` lines."""
    message = f"the request head is over {limits.max_head} bytes or {limits.max_headers} lines"
    return Refusal(431, "head_too_large", message)


def host_required() -> Refusal:
    """400: an HTTP/1.1 request without a Host, or any request with two."""
    return Refusal(400, "host_required", "a request needs exactly one Host header")


def coding_not_implemented() -> Refusal:
    """501: a Transfer-Encoding other than `chunked` alone (nginx answers the same)."""
    return Refusal(501, "coding_not_implemented", "only the chunked transfer coding is read")


def version_not_supported(version: str) -> Refusal:
    """505: an HTTP version other than 1.0 and 1.1."""
    return Refusal(505, "version_not_supported", f"HTTP/{version} is not served here")


def body_too_large(cap: int) -> Refusal:
    """413: the body is (or says it will be) past `cap` bytes."""
    return Refusal(413, "body_too_large", f"the request body is over the limit of {cap} bytes")


def late(limits: Limits, body: bool) -> Refusal:
    """408: the head (or the body, which shares the request's deadline) came too late."""
    what = f"within {limits.request_timeout:g}s" if body else "in time"
    return Refusal(408, "deadline", f"the request did not arrive {what}")


class Refusals:
    """Logs and counts a listener's refusals: `connection.refused` with the reason and
    the client's address; `count(listener, reason)` is the metrics' hook."""

    def __init__(self, listener: str, count: Callable[[str, str], None] | None = None) -> None:
        self.listener = listener
        self.count = count

    def __call__(self, reason: str, client: str | None) -> None:
        log.warning("connection.refused", listener=self.listener, reason=reason, client=client)
        if self.count is not None:
            self.count(self.listener, reason)
