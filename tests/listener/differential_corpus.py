"""Requests known to have been read two ways somewhere: smuggling, framing and the
corners of RFC 9112, for `test_differential.py`."""

from __future__ import annotations

H = b"Host: x\r\n"
CHUNKED = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
S = b"POST /s HTTP/1.1\r\n" + H  # a head's start, its headers to come
TE, CL = b"Transfer-Encoding: ", b"Content-Length: "
LAST = b"\r\n\r\n0\r\n\r\n"  # the head's end, and a chunked body's

CORPUS: dict[str, bytes] = {
    "get": b"GET / HTTP/1.1\r\n" + H + b"\r\n",
    "query": b"GET /a/b?c=d&e HTTP/1.1\r\n" + H + b"\r\n",
    "percent": b"GET /a%20b%2Fc HTTP/1.1\r\n" + H + b"\r\n",
    "post-length": b"POST /p HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello",
    "post-zero": b"POST /p HTTP/1.1\r\n" + H + b"Content-Length: 0\r\n\r\n",
    "http10": b"GET /ten HTTP/1.0\r\n\r\n",
    "http10-keep-alive": b"GET /ten HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    + b"GET /2 HTTP/1.0\r\n\r\n",
    "ows-values": b"GET / HTTP/1.1\r\nHost:   x  \r\nX-A:\tb c\t\r\n\r\n",
    "empty-value": b"GET / HTTP/1.1\r\n" + H + b"X-Empty:\r\n\r\n",
    "pipelined": b"GET /1 HTTP/1.1\r\n"
    + H
    + b"\r\nPOST /2 HTTP/1.1\r\n"
    + H
    + b"Content-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\n"
    + H
    + b"\r\n",
    "after-close": b"GET /1 HTTP/1.1\r\n"
    + H
    + b"Connection: close\r\n\r\nGET /2 HTTP/1.1\r\n"
    + H
    + b"\r\n",
    "chunked": CHUNKED + b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
    "chunked-upper-hex": CHUNKED + b"A\r\n0123456789\r\n0\r\n\r\n",
    "chunk-extension": CHUNKED + b"3;name=value\r\nabc\r\n0;last\r\n\r\n",
    "chunk-extension-quoted": CHUNKED + b'3;n="a b"\r\nabc\r\n0\r\n\r\n',
    "trailer": CHUNKED + b"3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
    "incomplete-head": b"GET / HTTP/1.1\r\nHost: x\r\n",
    "incomplete-body": b"POST /p HTTP/1.1\r\n" + H + b"Content-Length: 9\r\n\r\nabc",
    "incomplete-chunked": CHUNKED + b"3\r\nab",
    # Smuggling and framing.
    "cl-and-te": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-and-cl": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    "two-lengths": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Content-Length: 3\r\nContent-Length: 30\r\n\r\nabc",
    "two-same-lengths": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    "length-list": S + b"Content-Length: 3, 3\r\n\r\nabc",
    "length-plus": S + b"Content-Length: +3\r\n\r\nabc",
    "length-negative": S + b"Content-Length: -1\r\n\r\n",
    "length-hex": S + b"Content-Length: 0x3\r\n\r\nabc",
    "length-huge": S + b"Content-Length: 99999999999999999999999\r\n\r\n",
    "length-space-inside": S + b"Content-Length: 1 2\r\n\r\n",
    "obs-fold": b"GET /s HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n",
    "obs-fold-first": b"GET /s HTTP/1.1\r\n b\r\n" + H + b"\r\n",
    "bare-lf": b"GET /s HTTP/1.1\n" + b"Host: x\n\n",
    "bare-lf-header": b"GET /s HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n",
    "bare-cr": b"GET /s HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n",
    "nul-in-value": b"GET /s HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n",
    "nul-in-target": b"GET /s\x00 HTTP/1.1\r\n" + H + b"\r\n",
    "space-in-name": b"GET /s HTTP/1.1\r\n" + H + b"X A: b\r\n\r\n",
    "space-before-colon": b"GET /s HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n",
    "empty-name": b"GET /s HTTP/1.1\r\n" + H + b": b\r\n\r\n",
    "no-colon": b"GET /s HTTP/1.1\r\n" + H + b"X-A\r\n\r\n",
    "te-chunked-twice": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
    "te-two-lines": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-gzip-chunked": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "te-chunked-gzip": S + b"Transfer-Encoding: chunked, gzip\r\n\r\n",
    "te-identity": S + b"Transfer-Encoding: identity\r\n\r\n",
    "te-upper": S + b"Transfer-Encoding: CHUNKED" + LAST,
    "te-space-before-colon": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    "te-vertical-tab": b"POST /s HTTP/1.1\r\n"
    + H
    + b"Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n",
    "te-http10": b"POST /s HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "bad-chunk-size": CHUNKED + b"zz\r\n",
    "chunk-size-overflow": CHUNKED + b"10000000000000000001\r\nabc\r\n",
    "chunk-size-space": CHUNKED + b"3 \r\nabc\r\n0\r\n\r\n",
    "chunk-size-plus": CHUNKED + b"+3\r\nabc\r\n0\r\n\r\n",
    "chunk-data-too-long": CHUNKED + b"3\r\nabcd\r\n0\r\n\r\n",
    "chunk-bare-lf": CHUNKED + b"3\nabc\n0\n\n",
    # The request line.
    "absolute-form": b"GET http://h:8080/x?y HTTP/1.1\r\nHost: other\r\n\r\n",
    "asterisk-options": b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n",
    "connect": b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
    "upgrade": b"GET /ws HTTP/1.1\r\n" + H + b"Connection: upgrade\r\nUpgrade: websocket\r\n\r\n",
    "no-host": b"GET / HTTP/1.1\r\n\r\n",
    "two-hosts": b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    "http-2.0": b"GET / HTTP/2.0\r\n" + H + b"\r\n",
    "http-1.2": b"GET / HTTP/1.2\r\n" + H + b"\r\n",
    "http-0.9": b"GET / HTTP/0.9\r\n" + H + b"\r\n",
    "lowercase-version": b"GET / http/1.1\r\n" + H + b"\r\n",
    "no-version": b"GET /\r\n\r\n",
    "two-spaces": b"GET  / HTTP/1.1\r\n" + H + b"\r\n",
    "lowercase-method": b"get / HTTP/1.1\r\n" + H + b"\r\n",
    "odd-method": b"FOO / HTTP/1.1\r\n" + H + b"\r\n",
    "leading-crlf": b"\r\nGET / HTTP/1.1\r\n" + H + b"\r\n",
    "fragment": b"GET /a#frag HTTP/1.1\r\n" + H + b"\r\n",
    "non-ascii-target": b"GET /\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n",
    "obs-text-value": b"GET / HTTP/1.1\r\n" + H + b"X-A: \xc3\xa9\r\n\r\n",
    "not-http": b"\x16\x03\x01 garbage that is not HTTP\r\n\r\n",
}
