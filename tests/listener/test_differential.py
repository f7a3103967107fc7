"""The listener's reader against a reference parser (h11's server side): the same bytes
give the same requests (method, target, headers, body) and the same end (read, refused,
incomplete, an upgrade), on a corpus of every known smuggling and framing case and on
generated requests; every difference is listed in `KNOWN` with its reason.

Trailers are not compared: the reader drops them by design (they never become headers),
so only whether a request carrying them is read is."""

from __future__ import annotations

import urllib.parse

import pytest
from differential import Outcome, Request, listener, reference
from differential_corpus import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(60)

STRICT = "llhttp refuses what could be read two ways, by design; h11 reads it one way"
VERSIONS = "a version other than 1.0 and 1.1 is refused here (nginx's 505; llhttp's 400)"
# Case -> (how the listener ends, why it differs from h11).
KNOWN: dict[str, tuple[str, str]] = {
    "http10-keep-alive": ("read", "h11 closes after every HTTP/1.0 request; we keep it alive"),
    "cl-and-te": ("refused", STRICT),
    "te-and-cl": ("refused", STRICT),
    "two-same-lengths": ("refused", STRICT),
    "length-list": ("refused", STRICT),
    "obs-fold": ("refused", STRICT + " (RFC 9112 5.2 allows either)"),
    "bare-lf": ("refused", STRICT + " (RFC 9112 2.2 allows either)"),
    "bare-lf-header": ("refused", STRICT),
    "chunk-size-space": ("refused", STRICT),
    "chunk-size-overflow": ("refused", "llhttp refuses a size past 64 bits; h11 waits for it"),
    "chunk-bare-lf": ("refused", STRICT + "; h11 waits for a CRLF"),
    "connect": ("refused", "CONNECT is refused here; h11 hands over the connection"),
    "http-2.0": ("refused", VERSIONS),
    "http-1.2": ("refused", VERSIONS),
    "http-0.9": ("refused", VERSIONS),
    "lowercase-method": ("refused", "llhttp reads only the methods it knows, in capitals"),
    "odd-method": ("refused", "llhttp reads only the methods it knows, in capitals"),
    "two-spaces": ("read", "llhttp (like nginx) reads a request line with two spaces"),
    "leading-crlf": ("read", "RFC 9112 2.2: an empty line before a request is ignored"),
}


def normal(outcome: Outcome) -> Outcome:
    """What the two may differ in by design, made alike: the absolute form's authority is
    the Host (RFC 9112 3.2.2), a fragment is dropped, an empty query is none (as in an
    ASGI scope), a transfer coding's case."""
    requests = []
    for request in outcome.requests:
        target, headers = request.target.partition(b"#")[0], request.headers
        if not target.startswith(b"/") and b"://" in target:
            parts = urllib.parse.urlsplit(target)
            target = (parts.path or b"/") + (b"?" + parts.query if parts.query else b"")
            headers = [(n, v) for n, v in headers if n != b"host"] + [(b"host", parts.netloc)]
        headers = [(n, v.lower() if n == b"transfer-encoding" else v) for n, v in headers]
        target = target.removesuffix(b"?")
        requests.append(Request(request.method, target, headers, request.body))
    return Outcome(requests, outcome.end)


def compare(data: bytes, cuts: range | list[int] | None = None) -> tuple[Outcome, Outcome]:
    """(the listener's outcome, h11's), normalised; the listener's read whole and in two
    pieces at each of `cuts` (every one by default) is read the same."""
    ours = listener(data)
    for cut in range(1, len(data)) if cuts is None else cuts:
        split = listener(data, cut)
        assert normal(split).same(normal(ours)), (cut, split, ours)
    return normal(ours), normal(reference(data))


@pytest.mark.parametrize("case", list(CORPUS))
def test_the_corpus_is_read_as_h11_reads_it_or_its_difference_is_known(case: str) -> None:
    ours, theirs = compare(CORPUS[case])
    if case in KNOWN:
        end, why = KNOWN[case]
        assert ours.end == end, (ours, why)
        assert not ours.same(theirs), f"{case} no longer differs"
    else:
        assert ours.same(theirs), (ours, theirs)


def test_the_known_differences_are_all_in_the_corpus() -> None:
    assert set(KNOWN) <= set(CORPUS)


# Generated requests: well-formed ones, which both must read alike.
TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'", min_size=1)
VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20).map(
    lambda v: v.encode()
)
SEGMENT = st.text("abcxyz0123456789-._~%20", max_size=8)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]))
    path = "/" + "/".join(draw(st.lists(SEGMENT, max_size=4)))
    query = draw(st.one_of(st.just(""), st.builds(lambda q: "?" + q, SEGMENT)))
    head = [f"{method} {path}{query} HTTP/1.1".encode(), b"Host: " + draw(VALUE.filter(bool))]
    names = st.sampled_from(["x-a", "X-Custom", "accept", "user-agent"]) | TOKEN.filter(
        lambda n: (
            n.lower() not in ("host", "content-length", "transfer-encoding", "connection")
            and not n.lower().startswith(("expect", "upgrade"))
        )
    )
    for name in draw(st.lists(names, max_size=5)):
        ows = draw(st.sampled_from([b"", b" ", b"\t", b"  "]))
        head.append(name.encode() + b":" + ows + draw(VALUE) + draw(st.sampled_from([b"", b" "])))
    body = draw(st.binary(max_size=40))
    framing = draw(st.sampled_from(["none", "length", "chunked"]))
    if framing == "length" or (framing == "none" and body):
        head.append(b"Content-Length: %d" % len(body))
        tail = body
    elif framing == "chunked":
        head.append(b"Transfer-Encoding: chunked")
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        ext = draw(st.sampled_from([b"", b";a=b", b';q="x y"']))
        tail = b"".join(b"%x%b\r\n%b\r\n" % (len(p), ext, p) for p in pieces if p)
        tail += b"0\r\n" + draw(st.sampled_from([b"", b"X-Trailer: t\r\n"])) + b"\r\n"
    else:
        tail = b""
    return b"\r\n".join(head) + b"\r\n\r\n" + tail


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests(), min_size=1, max_size=3), st.integers(min_value=1))
def test_generated_requests_are_read_as_h11_reads_them(pipelined: list[bytes], cut: int) -> None:
    data = b"".join(pipelined)
    ours, theirs = compare(data, [cut % len(data)])
    assert ours.same(theirs), (ours, theirs)
    assert ours.end == "read"
    assert len(ours.requests) == len(pipelined)


# Generated damage: one byte changed in a well-formed request. Where both read it, they
# read the same requests: no byte makes the two frame it differently.
DAMAGE = st.sampled_from(list(b"\r\n\x00\t :;,\x0b\x7f0aZ-\xff"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests(), min_size=1, max_size=2), st.integers(min_value=0), DAMAGE)
def test_a_damaged_request_both_read_is_read_alike(
    pipelined: list[bytes], where: int, byte: int
) -> None:
    data = bytearray(b"".join(pipelined))
    data[where % len(data)] = byte
    ours, theirs = normal(listener(bytes(data))), normal(reference(bytes(data)))
    if "refused" not in (ours.end, theirs.end) and "upgrade" not in (ours.end, theirs.end):
        assert ours.requests == theirs.requests, (bytes(data), ours, theirs)
