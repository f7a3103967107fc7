"""LAN discovery over mDNS/DNS-SD: llamad advertises `_llamad._tcp`, llamactl browses.

The TXT record says what runs there: `v` (llamad's version), `llama` (llama-server's
build) and `tls` (0/1), so `fleet status --discover` can build a URL. zeroconf is
imported only inside the functions that use it: llamactl must stay fast without it.

A daemon listening on loopback advertises on loopback only, and then binds no wildcard
socket at all (zeroconf's default listener is 0.0.0.0:5353): asking for a loopback-only
API must not open anything the network can reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from llamad.common.hosts import is_loopback

log = structlog.get_logger("llamad.discovery")

SERVICE_TYPE = "_llamad._tcp.local."
MDNS_GROUP, MDNS_PORT = "224.0.0.251", 5353
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
# Linux-only option (value from <linux/in.h>): deliver only groups this socket joined.
IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)
_TXT_MAX = 255  # one TXT string: a length byte, then at most 255 bytes of key=value


def build_txt(version: str, llama: str, tls: bool) -> dict[str, str]:
    """The TXT properties a daemon advertises; values are cut to fit one TXT string."""
    llama = llama.removeprefix("version: ").strip() or "unknown"
    props = {"v": version, "llama": llama, "tls": "1" if tls else "0"}
    cut = {k: v.encode()[: _TXT_MAX - len(k) - 1] for k, v in props.items()}
    return {k: v.decode(errors="ignore") for k, v in cut.items()}


@dataclass(frozen=True)
class Found:
    """One advertised llamad."""

    name: str  # the DNS-SD instance name, `host:port`
    address: str
    port: int
    version: str | None
    llama: str | None
    tls: bool

    @property
    def url(self) -> str:
        """Where its control API answers."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def parse_txt(name: str, address: str, port: int, props: dict[Any, Any]) -> Found:
    """A browse result from its TXT properties (bytes or str keys and values)."""

    def text(value: object) -> str | None:
        if value is None:
            return None
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

    txt = {text(k): text(v) for k, v in props.items()}
    short = name.removesuffix("." + SERVICE_TYPE)
    return Found(short, address, port, txt.get("v"), txt.get("llama"), txt.get("tls") == "1")


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
def _zeroconf_sockets(loopback: bool) -> Iterator[dict[str, Any]]:
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
    with _zeroconf_sockets(loopback) as kwargs:
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


async def advertise(host: str, port: int, txt: dict[str, str], stop: asyncio.Event) -> None:
    """Advertise the API bound at host:port until `stop` is set. Never raises: mDNS is a
    convenience, and its failure must not take the daemon down."""
    try:
        from zeroconf import ServiceInfo
        from zeroconf.asyncio import AsyncZeroconf
    except ImportError:
        log.warning("discovery.unavailable", reason="zeroconf is not installed")
        return
    name = f"{socket.gethostname().split('.')[0]}:{port}.{SERVICE_TYPE}"
    zc: AsyncZeroconf | None = None
    try:
        addresses = advertised_addresses(host)
        with _zeroconf_sockets(is_loopback(host)) as kwargs:
            zc = AsyncZeroconf(**kwargs)
        info = ServiceInfo(
            SERVICE_TYPE, name, port=port, properties=dict(txt), parsed_addresses=addresses
        )
        await zc.async_register_service(info, allow_name_change=True)
        log.info("discovery.advertising", name=info.name, addresses=addresses, port=port)
        await stop.wait()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):  # goodbyes are a courtesy; shutdown is not
                await (await zc.async_unregister_service(info))
    except Exception as exc:
        log.warning("discovery.failed", error=str(exc) or type(exc).__name__)
    finally:
        if zc is not None:
            with contextlib.suppress(Exception):
                await zc.async_close()


def browse(timeout: float = 1.0, interface: str | None = None) -> list[Found]:
    """The llamads that answer within `timeout` seconds, on every interface or only on
    the one with address `interface`. Raises ImportError without zeroconf."""
    from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

    names: set[str] = set()

    class Listener(ServiceListener):
        def add_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            names.add(name)

        update_service = add_service

        def remove_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            names.discard(name)

    with browsing_on(interface) as kwargs:
        # A one-shot querier (RFC 6762 5.1): answers come to a port of our own, not to a
        # 5353 shared with the system's responder, which could be handed them instead.
        zc = Zeroconf(unicast=True, **kwargs)
    found: list[Found] = []
    try:
        browser = ServiceBrowser(zc, SERVICE_TYPE, Listener())
        time.sleep(timeout)
        browser.cancel()
        for name in sorted(names):
            # Answers to the browse usually carry SRV, TXT and A: then this returns at once.
            info = zc.get_service_info(SERVICE_TYPE, name, timeout=300)
            if info is not None and info.port and info.parsed_addresses():
                address = info.parsed_addresses()[0]
                found.append(parse_txt(name, address, info.port, info.properties))
    finally:
        zc.close()
    return found
