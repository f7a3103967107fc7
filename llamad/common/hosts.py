"""What a host string names: one rule for "only this machine" everywhere."""

from __future__ import annotations

import ipaddress


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` as an address (an IPv4-mapped IPv6 one as IPv4, a zone dropped); None if
    it is not one."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_loopback(host: str | None) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1, v4-mapped
    loopback); False otherwise, and for None (a Unix socket's peer)."""
    if not host:
        return False
    ip = _ip(host)
    return host.lower() == "localhost" if ip is None else ip.is_loopback


def client_key(host: str | None) -> str | None:
    """The address a client is counted by: the IP, an IPv6 client's /64 (one host
    usually holds a whole /64); None for a Unix socket."""
    ip = _ip(host or "")
    if ip is None:
        return host or None
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def is_wildcard(host: str) -> bool:
    """True for a bind to every interface: empty, 0.0.0.0, :: (any unspecified address)."""
    try:
        return not host or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


_LOOPBACK_NAMES = {"localhost": "127.0.0.1", "ip6-localhost": "::1"}


def same_address(a: str, b: str) -> bool:
    """Whether two bind hosts can collide on one port: equal once `localhost` is read as
    127.0.0.1, or either is a wildcard."""
    a, b = (_LOOPBACK_NAMES.get(h.lower(), h) for h in (a, b))
    return a == b or is_wildcard(a) or is_wildcard(b)
