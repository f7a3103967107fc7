"""common.hosts: which host strings mean this machine only, or every interface."""

from __future__ import annotations

import pytest

from llamad.common.hosts import client_key, is_loopback, is_wildcard


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
        ("::ffff:127.0.0.1", True, False),  # a client's address as a dual-stack socket has it
        ("fe80::1%eth0", False, False),
    ],
)
def test_host_kinds(host: str, loopback: bool, wildcard: bool) -> None:
    assert (is_loopback(host), is_wildcard(host)) == (loopback, wildcard)


def test_client_keys_count_an_ipv6_client_by_its_64() -> None:
    assert client_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff") == "2001:db8::/64"
    assert client_key("10.0.0.1") == "10.0.0.1"
    assert client_key(None) is None
    assert not is_loopback(None)  # a Unix socket's peer
