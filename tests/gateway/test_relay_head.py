"""An upstream answer's header values are what RFC 9112 5 says they are: trailing
whitespace, which llhttp leaves and the listener would refuse to write, is not kept."""

from __future__ import annotations

import pytest

from llamad.upstream.connection import Connection

pytestmark = pytest.mark.timeout(10)


async def test_an_upstream_values_trailing_whitespace_is_not_relayed() -> None:
    conn = Connection(("127.0.0.1", 1))
    conn.data_received(b"HTTP/1.1 200 OK\r\nX-A: b c \t\r\nContent-Length: 0\r\n\r\n")
    assert conn.headers == [(b"X-A", b"b c"), (b"Content-Length", b"0")]
    conn.expiry.cancel()
