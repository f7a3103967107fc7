"""Reading requests off one connection with llhttp (httptools' public parser).

llhttp refuses what would let a request be read two ways (Content-Length beside
Transfer-Encoding, a repeated Content-Length, obs-fold, a bare LF, a Transfer-Encoding
that does not end in chunked); the `Reader` refuses the rest of what RFC 9112 and nginx
refuse (no Host, or two; a transfer coding other than `chunked`, 501; a version other than
1.0 and 1.1, 505), counts each head against the listener's limits as the bytes come, and
hands its connection each request's head, its body and its end.

The bytes a chunked body spends on anything but its data (chunk sizes and extensions,
trailers) count against the head's limit too: llhttp gathers a header line, a trailer's
as well, into one value piece by piece before it calls back, so an endless line is
refused by the bytes fed, not when it ends.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import NoReturn, Protocol

import httptools

from llamad.common.framing import Framing
from llamad.listener.limits import (
    Limits,
    Refusal,
    coding_not_implemented,
    head_too_large,
    host_required,
    version_not_supported,
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

    __slots__ = ("_authority", "_codings", "_expect", "_framing", "_headers", "_hosts",
                 "_in_head", "_length", "_refused", "_url", "parser", "requests")  # fmt: skip

    def __init__(self, requests: Requests) -> None:
        self.requests = requests
        self.parser = httptools.HttpRequestParser(self)
        # Bytes after a request that said `Connection: close` are dropped, not an error
        # that would cut off the answer it is owed.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self._url: list[bytes] = []  # its pieces: joined once, never grown by `+=`
        self._headers: Headers = []
        limits = requests.limits
        self._framing = Framing(limits.max_head, limits.max_headers)
        self._length = self._hosts = self._codings = 0
        self._authority: bytes | None = None  # an absolute-form target's
        self._refused: Refusal | None = None  # raised by a callback, for `feed`
        self._expect = self._in_head = False

    def feed(self, data: bytes) -> None:
        """Read `data`; raises a `Refusal` (a limit), `Invalid` or `Upgraded`."""
        self._framing.fed(len(data))
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if self._refused is None:
                raise Invalid from exc  # a target that is not one (a CONNECT's, a non-ASCII path)
        except httptools.HttpParserUpgrade:
            raise Upgraded from None
        except httptools.HttpParserError as exc:
            raise Invalid from exc
        if self._refused is not None:
            # Raised here, outside the handler, and bare: a refusal that kept its callback's
            # frames (and the buffer fed) in a cycle would hold them until a full collection.
            raise self._taken()
        if self._framing.over:
            # Past the limit before llhttp has called back: a header or trailer line it
            # still gathers, or a chunk's extension.
            raise head_too_large(self.requests.limits)

    def release(self) -> None:
        """Its connection is gone: the parser (which holds this reader's callbacks) and
        the requests go, so that none of them waits for the cyclic collector."""
        del self.parser, self.requests

    def path(self) -> str:
        """The path of the request being read, as far as it has come (for a refusal)."""
        return b"".join(self._url).split(b"?", 1)[0].decode("latin-1")

    # llhttp's callbacks.
    def on_message_begin(self) -> None:
        self._url, self._headers = [], []
        self._length = self._hosts = self._codings = 0
        self._expect, self._in_head, self._authority = False, True, None
        self.requests.begin()
        limits = self.requests.limits
        self._framing.begin(limits.max_head, limits.max_headers)

    def on_url(self, url: bytes) -> None:
        if not self._framing.counted(len(url)):
            self._refuse(head_too_large(self.requests.limits))
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._framing.line(len(name) + len(value) + 4):
            self._refuse(head_too_large(self.requests.limits))
        if not self._in_head:
            return  # a chunked body's trailer: never a header of the request
        name, value = name.lower(), value.rstrip(b" \t")  # llhttp leaves trailing OWS
        if name == b"content-length":
            self._length = int(value)  # llhttp has refused one that is not digits
        elif name == b"host":
            self._hosts += 1
        elif name == b"transfer-encoding":
            self._codings += 1
            if self._codings > 1 or value.strip().lower() != b"chunked":
                self._refuse(coding_not_implemented())
        elif name == b"expect" and value.lower() == b"100-continue":
            self._expect = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._framing.body_begins()
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            self._refuse(version_not_supported(version))
        if self._hosts > 1 or (self._hosts == 0 and version == "1.1"):
            self._refuse(host_required())  # RFC 9112 3.2: exactly one, in HTTP/1.1
        path, raw_path, query, authority = _target(b"".join(self._url))
        headers = self._headers
        if authority is not None:
            # RFC 9112 3.2.2: an absolute-form target's authority is the request's host.
            headers = [(k, v) for k, v in headers if k != b"host"] + [(b"host", authority)]
        head = Head(
            parser.get_method().decode("ascii"), path, raw_path, query, version, headers,
            parser.should_keep_alive(), self._expect, self._length,
        )  # fmt: skip
        try:
            self.requests.head(head)
        except Refusal as why:  # a body that says it is over the limit
            self._refuse(why)

    def on_chunk_header(self) -> None:
        self._framing.chunk()

    def on_body(self, body: bytes) -> None:
        self._framing.data(len(body))
        try:
            self.requests.body(body)
        except Refusal as why:  # a body past the limit
            self._refuse(why)

    def on_message_complete(self) -> None:
        self._framing.body_begins()  # what follows is the next head's
        self.requests.end()

    def _refuse(self, why: Refusal) -> NoReturn:
        """Raise `why` out of a callback: llhttp wraps what a callback raises, so `feed`
        finds it here."""
        self._refused = why
        raise why

    def _taken(self) -> Refusal:
        why, self._refused = self._refused, None
        assert why is not None
        return why.with_traceback(None)


def _target(url: bytes) -> tuple[str, bytes, bytes, bytes | None]:
    """(path, raw path, query, the authority of an absolute-form target) of a request
    target; raises ValueError for one that is not a path (a CONNECT's authority, `*`) or
    not ASCII."""
    authority = None
    if url[:1] == b"/" and b"#" not in url:
        raw, _, query = url.partition(b"?")
    else:  # absolute form, or a fragment to drop
        parsed = httptools.parse_url(url)
        if parsed.path is None:
            raise ValueError("no path in the request target")
        raw, query = parsed.path, parsed.query or b""
        if parsed.host:
            host = b"[%b]" % parsed.host if b":" in parsed.host else parsed.host
            authority = host if parsed.port is None else b"%b:%d" % (host, parsed.port)
    path = raw.decode("ascii")
    return (urllib.parse.unquote(path) if "%" in path else path), raw, query, authority
