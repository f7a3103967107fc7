"""The bytes a listener writes of its own: status lines, the Date header, and the few
whole answers it gives without the app (a refusal, a bad request, a failed app)."""

from __future__ import annotations

import functools
import http
import time
from email.utils import formatdate

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
INVALID = "Invalid HTTP request received."

_date = (0, b"")


@functools.cache
def status_line(status: int) -> bytes:
    """`HTTP/1.1 <status> <phrase>` and its CRLF (no phrase for a code http.HTTPStatus
    does not know)."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")


def date_line() -> bytes:
    """The Date header's line, made once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, f"date: {formatdate(now, usegmt=True)}\r\n".encode("ascii"))
    return _date[1]


def whole(status: int, content_type: bytes, body: bytes) -> bytes:
    """A whole answer that closes its connection."""
    head = (
        status_line(status)
        + date_line()
        + b"content-type: "
        + content_type
        + b"\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    return head + body


def refusal(status: int, body: bytes) -> bytes:
    """A refusal (`limits.Refusal`), its JSON body in the API family's shape."""
    return whole(status, b"application/json", body)


def bad_request() -> bytes:
    """What a request the parser rejects is answered."""
    return whole(400, b"text/plain; charset=utf-8", INVALID.encode("ascii"))


def server_error() -> bytes:
    """What a request the app failed before answering is answered."""
    return whole(500, b"text/plain; charset=utf-8", b"Internal Server Error")
