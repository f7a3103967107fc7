"""Reading requests off one connection with llhttp (httptools' public parser).

llhttp refuses what would let a request be read two ways (Content-Length beside
Transfer-Encoding, a repeated Content-Length, obs-fold, a bare LF, a Transfer-Encoding
that does not end in chunked); the `Reader` counts each head against the listener's
limits as the parser's callbacks come, and hands its connection each request's head,
its body and its end.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Protocol

import httptools

from llamad.listener.limits import Limits, Refusal, head_too_large

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

    __slots__ = ("_expect", "_headers", "_in_body", "_in_head", "_length", "_lines",
                 "_max_head", "_max_lines", "_raw", "_size", "parser", "requests",
                 "url")  # fmt: skip

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
        self._raw = 0  # bytes since the last head ended: a bound on the next one's size
        self._expect = self._in_head = self._in_body = False

    def feed(self, data: bytes) -> None:
        """Read `data`; raises a `Refusal` (a limit), `Invalid` or `Upgraded`."""
        if not self._in_body:
            self._raw += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, Refusal):
                raise exc.__context__ from None
            raise Invalid from exc  # a target that is not one (a CONNECT's, a non-ASCII path)
        except httptools.HttpParserUpgrade:
            raise Upgraded from None
        except httptools.HttpParserError as exc:
            raise Invalid from exc
        limits = self.requests.limits
        if not self._in_body and self._raw > limits.max_head:
            # Past the limit before llhttp has called back: a header line it still gathers.
            raise head_too_large(limits)

    def path(self) -> str:
        """The path of the request being read, as far as it has come (for a refusal)."""
        return self.url.split(b"?", 1)[0].decode("latin-1")

    # llhttp's callbacks.
    def on_message_begin(self) -> None:
        self.url, self._headers = b"", []
        self._size = self._lines = self._length = 0
        self._expect, self._in_head = False, True
        self.requests.begin()
        limits = self.requests.limits
        self._max_head, self._max_lines = limits.max_head, limits.max_headers

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._lines += 1
        self._size += len(name) + len(value) + 4
        if self._size > self._max_head or self._lines > self._max_lines:
            raise head_too_large(self.requests.limits)
        if not self._in_head:
            return  # a chunked body's trailer: never a header of the request
        name = name.lower()
        if name == b"content-length":
            self._length = int(value)  # llhttp has refused one that is not digits
        elif name == b"expect" and value.lower() == b"100-continue":
            self._expect = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head, self._in_body, self._raw = False, True, 0
        parser = self.parser
        path, raw_path, query = _target(self.url)
        head = Head(
            parser.get_method().decode("ascii"), path, raw_path, query,
            parser.get_http_version(), self._headers, parser.should_keep_alive(),
            self._expect, self._length,
        )  # fmt: skip
        self.requests.head(head)

    def on_body(self, body: bytes) -> None:
        self.requests.body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        self.requests.end()

    def _count(self, size: int) -> None:
        self._size += size
        if self._size > self._max_head or self._lines > self._max_lines:
            raise head_too_large(self.requests.limits)


def _target(url: bytes) -> tuple[str, bytes, bytes]:
    """(path, raw path, query) of a request target; raises ValueError for one that is
    not a path (a CONNECT's authority, `*`) or not ASCII."""
    if url[:1] == b"/" and b"#" not in url:
        raw, _, query = url.partition(b"?")
    else:  # absolute form, or a fragment to drop
        parsed = httptools.parse_url(url)
        if parsed.path is None:
            raise ValueError("no path in the request target")
        raw, query = parsed.path, parsed.query or b""
    path = raw.decode("ascii")
    return (urllib.parse.unquote(path) if "%" in path else path), raw, query
