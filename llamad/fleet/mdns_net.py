"""Where mDNS listens and what a daemon advertises: zeroconf's sockets and the addresses.

A daemon listening on loopback advertises on loopback only, and then binds no wildcard
socket at all (zeroconf's default listener is 0.0.0.0:5353): asking for a loopback-only
API must not open anything the network can reach.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

from llamad.common.hosts import is_loopback

MDNS_GROUP, MDNS_PORT = "224.0.0.251", 5353
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
# Linux-only option (value from <linux/in.h>): deliver only groups this socket joined.
IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)


def _loopback_sockets(
    _interfaces: Any, unicast: bool, *_args: Any, **_kw: Any
) -> tuple[socket.socket | None, list[socket.socket]]:
    """zeroconf's sockets on 127.0.0.1 only. The listener is bound to the mDNS group, so it
    receives what is sent to the group and nothing addressed to this host; a one-shot
    (unicast) browser has no listener and sends from a port of its own."""
    from zeroconf._utils.net import add_multicast_member, new_respond_socket

    if unicast:
        respond = new_respond_socket("127.0.0.1", unicast=True)
        if respond is None:
            raise OSError("cannot bind 127.0.0.1")
        loopback = socket.inet_aton("127.0.0.1")
        respond.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, loopback)
        return None, [respond]
    listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listen.bind((MDNS_GROUP, MDNS_PORT))
        with contextlib.suppress(OSError):  # not on macOS, where membership already filters
            listen.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
        if not add_multicast_member(listen, "127.0.0.1"):
            raise OSError("cannot join the mDNS group on loopback")
        respond = new_respond_socket("127.0.0.1")
        if respond is None:
            raise OSError("cannot bind 127.0.0.1:5353")
    except BaseException:
        listen.close()
        raise
    return listen, [respond]


@contextlib.contextmanager
def zeroconf_sockets(loopback: bool) -> Iterator[dict[str, Any]]:
    """Keyword arguments for Zeroconf(); on loopback, its socket factory swapped meanwhile."""
    if not loopback:
        yield {}
        return
    import zeroconf._core

    # Zeroconf() looks the factory up by this module-level name (as of zeroconf 0.154).
    namespace = vars(zeroconf._core)
    original = namespace["create_sockets"]
    namespace["create_sockets"] = _loopback_sockets
    try:
        yield {"interfaces": ["127.0.0.1"]}
    finally:
        namespace["create_sockets"] = original


@contextlib.contextmanager
def browsing_on(interface: str | None) -> Iterator[dict[str, Any]]:
    """Keyword arguments for a Zeroconf() that browses on the address `interface` only
    (loopback: without any wildcard socket), or on every interface for None."""
    loopback = interface is not None and is_loopback(interface)
    with zeroconf_sockets(loopback) as kwargs:
        yield kwargs or ({"interfaces": [interface]} if interface else {})


def advertised_addresses(host: str) -> list[str]:
    """The addresses a daemon listening on `host` advertises."""
    if is_loopback(host):
        return ["127.0.0.1"]
    with contextlib.suppress(ValueError):
        if str(ipaddress.ip_address(host)) not in WILDCARDS:
            return [host]
    # A wildcard (or a name): every IPv4 address of this machine but loopback.
    ips = (ip for ip in local_addresses() if ":" not in ip)
    return sorted(ip for ip in ips if not ipaddress.ip_address(ip).is_loopback)


def local_addresses() -> set[str]:
    """Every address of this machine's interfaces, IPv4 and IPv6."""
    import ifaddr

    return {
        ip.ip if isinstance(ip.ip, str) else ip.ip[0]
        for adapter in ifaddr.get_adapters()
        for ip in adapter.ips
    }
