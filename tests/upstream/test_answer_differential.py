"""The upstream client's answer parsing against h11's client side: the same bytes, the
same verdict (refused, or the same status, headers and body), on a corpus of framing and
smuggling cases and on generated answers. Where they differ on purpose, the case is
listed below with its reason."""

from __future__ import annotations

import asyncio

import pytest
from answer_pair import REFUSED, h11s, ours
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(60)

OK2 = b"Content-Length: 2\r\n\r\nok"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

# Answers both read alike.
SAME = {
    "content-length": b"HTTP/1.1 200 OK\r\n" + OK2,
    "chunked": CHUNKED + b"2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n",
    "close-delimited": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it",
    "http/1.0 to the close": b"HTTP/1.0 200 OK\r\n\r\nall",
    "100 then final": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n" + OK2,
    "103 then final": b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n" + OK2,
    "204": b"HTTP/1.1 204 No Content\r\n\r\n",
    "304 with a length": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
    "no reason phrase": b"HTTP/1.1 200\r\n" + OK2,
    "chunk extension": CHUNKED + b"2;a=b\r\nok\r\n0\r\n\r\n",
    "differing duplicate lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!"
    ),
    "signed length": b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    "te gzip, chunked": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    ),
    "te gzip alone": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw",
    "bare CR": b"HTTP/1.1 200 OK\rContent-Length: 2\r\n\r\nok",
    "chunk size overflow": CHUNKED + b"FFFFFFFFFFFFFFFFF1\r\nok\r\n0\r\n\r\n",
    "NUL in a value": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n" + OK2,
    "space in a name": b"HTTP/1.1 200 OK\r\nX A: b\r\n" + OK2,
    "space before the colon": b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
    "HTTP/2.0 status line": b"HTTP/2.0 200 OK\r\n" + OK2,
    "four-digit status": b"HTTP/1.1 2000 OK\r\n" + OK2,
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n",
    "body cut short": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok",
    "chunked cut short": CHUNKED + b"5\r\nok",
    # The answer's own status, not that of bytes after it (which close the connection).
    "bytes after the answer": b"HTTP/1.1 404 X\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n"
    + OK2,
    "101 unasked": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
}

# Answers read differently on purpose: the case, and why.
DIFFERENT = {
    # llhttp refuses these heads; h11 reads them. Refusing an upstream's odd framing
    # is the safe side for a proxy (RFC 9112 6.3: a proxy should treat them as errors).
    "equal duplicate lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"
    ),
    "length list": b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
    "length and chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    ),
    # RFC 9112 5.2: a proxy either refuses obs-fold (as nginx and llhttp do) or unfolds it.
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\n" + OK2,
    # RFC 9112 2.2 lets a recipient accept bare LF; llhttp's strict mode does not.
    "bare LF": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    # llhttp skips empty lines before a status line (RFC 9112 2.2 allows it for requests);
    # h11 refuses them. Harmless: nothing is framed by them.
    "CRLF before the status line": b"\r\nHTTP/1.1 200 OK\r\n" + OK2,
    # h11 lets any byte but NUL and whitespace into a value; llhttp refuses control
    # characters (RFC 9110 5.5), which a relay would pass on to its client.
    "control character in a value": b"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\n" + OK2,
    # h11 reads any one-digit version; llhttp only 0.9, 1.0 and 1.1 (and so frames no
    # answer by rules it doesn't know).
    "HTTP/0.1 status line": b"HTTP/0.1 200 OK\r\n" + OK2,
    # h11 bounds only a head still incomplete in its buffer (16 KiB); this client bounds
    # every head, as nginx's proxy_buffer_size does.
    "head over 16 KiB": b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 20000 + b"\r\n" + OK2,
}

# Trailers: h11 hands them over; the upstream client reads and drops them by design
# (nothing llamad relays uses them), so only the body is compared.
TRAILERS = CHUNKED + b"2\r\nok\r\n0\r\nX-T: 1\r\n\r\n"


def _ours(data: bytes, pieces: int = 1) -> object:
    return asyncio.run(ours(data, pieces))


@pytest.mark.parametrize("name", list(SAME))
def test_both_read_alike(name: str) -> None:
    data = SAME[name]
    expected = h11s(data)
    assert _ours(data) == expected
    assert _ours(data, pieces=len(data)) == expected  # byte by byte, the same


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_listed_differences_stay_as_listed(name: str) -> None:
    data = DIFFERENT[name]
    theirs, mine = h11s(data), _ours(data)
    assert theirs != mine
    if name == "CRLF before the status line":
        assert theirs == REFUSED
    else:
        assert mine == REFUSED


def test_trailers_are_read_past_and_dropped() -> None:
    theirs, mine = h11s(TRAILERS), _ours(TRAILERS)
    assert mine != REFUSED
    assert (mine.status, mine.headers, mine.body) == (theirs.status, theirs.headers, b"ok")


def test_a_head_answer_is_its_head() -> None:
    """The pool reads no body after HEAD (`Answer(head_only=True)`): only heads compare."""
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    theirs = h11s(data, method=b"HEAD")
    mine = asyncio.run(ours(data + b"hello"))
    assert (mine.status, mine.headers) == (theirs.status, theirs.headers)


TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=8)
VALUE = st.binary(max_size=12).filter(lambda v: b"\r" not in v and b"\n" not in v)


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """Answers framed every way, with odd bytes now and then."""
    status = draw(st.sampled_from([200, 201, 204, 304, 404, 500, 100, 103]))
    fields = draw(st.lists(st.tuples(TOKEN, VALUE), max_size=4))
    body = draw(st.binary(max_size=40))
    framing = draw(st.sampled_from(["length", "chunked", "close", "wrong length"]))
    head = [b"HTTP/1.1 %d X\r\n" % status]
    head += [k.encode() + b": " + v.strip(b" \t") + b"\r\n" for k, v in fields]
    if framing == "length":
        head.append(b"Content-Length: %d\r\n" % len(body))
    elif framing == "wrong length":
        head.append(b"Content-Length: %d\r\n" % (len(body) + 3))
    elif framing == "chunked":
        head.append(b"Transfer-Encoding: chunked\r\n")
        body = (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)) if body else b"0\r\n\r\n"
    data = b"".join(head) + b"\r\n" + body
    if status < 200:
        data += b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=2)) + data[at + 1 :]
    return data


def _listed(data: bytes) -> bool:
    """Generated answers that fall under a listed difference."""
    head = data.split(b"\r\n\r\n", 1)[0]
    controls = set(range(32)) - {9, 10, 13} | {127}
    return (
        any(byte in controls for byte in head)  # control characters
        or not data.startswith((b"HTTP/1.0 ", b"HTTP/1.1 "))  # another version
        or b"\n" in head.replace(b"\r\n", b"")  # bare LF
        or b"\r\n " in head
        or b"\r\n\t" in head  # obs-fold
        or data.startswith((b"\r", b"\n"))
    )


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(answers())
def test_generated_answers_read_alike(data: bytes) -> None:
    theirs, mine = h11s(data), _ours(data)
    if theirs != mine and _listed(data):
        return
    assert mine == theirs
