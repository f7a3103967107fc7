"""common.hosts: which host strings mean this machine only, or every interface."""

from __future__ import annotations

import pytest

from llamad.common.hosts import is_loopback, is_wildcard


@pytest.mark.parametrize(
    ("host", "loopback", "wildcard"),
    [
        ("127.0.0.1", True, False),
        ("127.1.2.3", True, False),
        ("::1", True, False),
        ("localhost", True, False),
        ("LOCALHOST", True, False),
        ("0.0.0.0", False, True),
        ("::", False, True),
        ("", False, True),
        ("192.168.1.5", False, False),
        ("studio.local", False, False),
    ],
)
def test_host_kinds(host: str, loopback: bool, wildcard: bool) -> None:
    assert (is_loopback(host), is_wildcard(host)) == (loopback, wildcard)
