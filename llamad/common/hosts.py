"""What a host string names: one rule for "only this machine" everywhere."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1); False otherwise."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def is_wildcard(host: str) -> bool:
    """True for a bind to every interface: empty, 0.0.0.0, :: (any unspecified address)."""
    try:
        return not host or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
