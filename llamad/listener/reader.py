"""Reading requests off one connection with llhttp (httptools' public parser).

llhttp refuses what would let a request be read two ways (Content-Length beside
Transfer-Encoding, a repeated Content-Length, obs-fold, a bare LF, a Transfer-Encoding
that does not end in chunked); the `Reader` counts each head against the listener's
limits as the parser's callbacks come, and hands its connection each request's head,
its body and its end.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import httptools

from llamad.listener.limits import (
    Limits,
    Refusal,
    bad_host,
    bad_version,
    head_too_large,
    unknown_coding,
)

Headers = list[tuple[bytes, bytes]]


class Invalid(Exception):
    """The parser refused the bytes: not HTTP/1.1 we read."""


class Upgraded(Exception):
    """The request asked to switch protocols (or was a CONNECT): nothing after it is read."""


@dataclass(slots=True)
class Head:
    """A request's head, read whole."""

    method: str
    path: str
    raw_path: bytes
    query: bytes
    version: str  # "1.1" or "1.0"
    headers: Headers  # names lower case, in order
    keep_alive: bool
    expect_continue: bool
    length: int  # the Content-Length, 0 when there is none


class Requests(Protocol):
    """What the reader tells (the connection)."""

    limits: Limits

    def begin(self) -> None: ...
    def head(self, head: Head) -> None: ...
    def body(self, data: bytes) -> None: ...
    def end(self) -> None: ...


class Reader:
    """One connection's parser and the head it is reading."""

    __slots__ = ("_body", "_coding", "_expect", "_headers", "_hosts", "_in_head", "_length",
                 "_lines", "_mark", "_max_head", "_max_lines", "_raw", "_refusal", "_size",
                 "parser", "requests", "url")  # fmt: skip

    def __init__(self, requests: Requests) -> None:
        self.requests = requests
        self.parser = httptools.HttpRequestParser(self)
        # Bytes after a request that said `Connection: close` are dropped, not an error
        # that would cut off the answer it is owed.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.url = b""
        self._headers: Headers = []
        self._size = self._lines = self._length = 0
        self._max_head = self._max_lines = 0  # the limits in force for this head
        # Framing bytes (a head, chunk-size lines and their extensions, a trailer) since the
        # last body bytes or whole head: bounds a line llhttp still gathers, which no
        # callback has counted yet.
        self._raw = 0
        self._body = 0  # body bytes (and heads counted whole) in the buffer being fed
        self._mark = False  # the buffer being fed held body bytes or a head's end
        self._hosts = self._coding = 0  # Host and Transfer-Encoding lines of the head
        self._refusal: Refusal | None = None  # raised in a callback, which llhttp reports
        self._expect = self._in_head = False

    def feed(self, data: bytes) -> None:
        """Read `data`; raises a `Refusal` (a limit), `Invalid` or `Upgraded`."""
        self._body, self._mark = 0, False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            why, self._refusal = self._refusal, None
            if why is not None:
                raise why from None
            raise Invalid from exc  # a target that is not one (a CONNECT's, a non-ASCII path)
        except httptools.HttpParserUpgrade:
            raise Upgraded from None
        except httptools.HttpParserError as exc:
            raise Invalid from exc
        # Which framing bytes of the buffer came after its last body bytes is not told:
        # all of them are counted, an over-estimate by the framing before those.
        framing = len(data) - self._body
        self._raw = max(framing, 0) if self._mark else self._raw + framing
        if self._raw > self.requests.limits.max_head:
            raise head_too_large(self.requests.limits)

    def path(self) -> str:
        """The path of the request being read, as far as it has come (for a refusal)."""
        return self.url.split(b"?", 1)[0].decode("latin-1")

    # llhttp's callbacks.
    def on_message_begin(self) -> None:
        self.url, self._headers = b"", []
        self._size = self._lines = self._length = self._hosts = self._coding = 0
        self._expect, self._in_head = False, True
        self._tell(self.requests.begin)
        limits = self.requests.limits
        self._max_head, self._max_lines = limits.max_head, limits.max_headers

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)
        if not self._in_head:
            return  # a chunked body's trailer: never a header of the request
        name, value = name.lower(), value.rstrip(b" \t")  # llhttp leaves trailing OWS
        if name == b"content-length":
            self._length = int(value)  # llhttp has refused one that is not digits
        elif name == b"host":
            self._hosts += 1
        elif name == b"transfer-encoding":
            self._coding += 1 if value.lower() == b"chunked" else 2
        elif name == b"expect" and value.lower() == b"100-continue":
            self._expect = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head, self._mark = False, True
        self._body += self._size  # counted whole against the limit already
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            self._refuse(bad_version(version))
        if self._coding > 1:  # RFC 9112 6.1: only chunked is read here
            self._refuse(unknown_coding())
        if self._hosts > 1 or (self._hosts == 0 and version == "1.1"):
            self._refuse(bad_host(self._hosts))  # RFC 9112 3.2
        path, raw_path, query, authority = _target(self.url)
        if authority is not None:  # RFC 9112 3.2.2: the target's authority is the Host
            self._headers = [(n, v) for n, v in self._headers if n != b"host"]
            self._headers.append((b"host", authority))
        head = Head(
            parser.get_method().decode("ascii"), path, raw_path, query, version,
            self._headers, parser.should_keep_alive(), self._expect, self._length,
        )  # fmt: skip
        self._tell(self.requests.head, head)

    def on_body(self, body: bytes) -> None:
        self._body += len(body)
        self._mark = True
        self._tell(self.requests.body, body)

    def on_message_complete(self) -> None:
        self._tell(self.requests.end)

    def _count(self, size: int, lines: int) -> None:
        self._size += size
        self._lines += lines
        if self._size > self._max_head or self._lines > self._max_lines:
            self._refuse(head_too_large(self.requests.limits))

    def _refuse(self, why: Refusal) -> NoReturn:
        """Raise `why` from a callback, kept for `feed`: llhttp reports only that one failed."""
        self._refusal = why
        raise why

    def _tell(self, told: Callable[..., None], *args: Any) -> None:
        try:
            told(*args)
        except Refusal as why:
            self._refuse(why)


def _target(url: bytes) -> tuple[str, bytes, bytes, bytes | None]:
    """(path, raw path, query, authority or None) of a request target; raises ValueError
    for one that is not a path (a CONNECT's authority, `*`) or not ASCII."""
    authority = None
    if url[:1] == b"/" and b"#" not in url:
        raw, _, query = url.partition(b"?")
    else:  # absolute form, or a fragment to drop
        parsed = httptools.parse_url(url)
        if parsed.path is None:
            raise ValueError("no path in the request target")
        raw, query = parsed.path, parsed.query or b""
        if parsed.host is not None:
            host = b"[%b]" % parsed.host if b":" in parsed.host else parsed.host
            authority = host if parsed.port is None else b"%b:%d" % (host, parsed.port)
    path = raw.decode("ascii")
    return (urllib.parse.unquote(path) if "%" in path else path), raw, query, authority
