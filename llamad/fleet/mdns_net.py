"""Where mDNS listens and what a daemon advertises: zeroconf's interfaces and the addresses.

Only zeroconf's public constructor arguments choose the sockets. A daemon listening on
loopback advertises 127.0.0.1 on 127.0.0.1 only: zeroconf joins the mDNS group there and
sends from a socket bound to it, so neither its announcements nor its answers leave the
machine. Its listener is zeroconf's own, bound to port 5353 on every address (there is
no public way to narrow it); what arrives there from the network is answered on loopback,
where it cannot be routed back.
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from llamad.common.hosts import is_loopback

WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def zeroconf_options(interface: str | None) -> dict[str, Any]:
    """Keyword arguments for Zeroconf() on the address `interface` only (any loopback
    address: 127.0.0.1, IPv4 alone), or on every interface for None."""
    if interface is None:
        return {}
    from zeroconf import IPVersion

    if is_loopback(interface):
        return {"interfaces": ["127.0.0.1"], "ip_version": IPVersion.V4Only}
    return {"interfaces": [interface]}


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
