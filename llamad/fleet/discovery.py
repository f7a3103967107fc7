"""LAN discovery over mDNS/DNS-SD: llamad advertises `_llamad._tcp`, llamactl browses.

The TXT record says what runs there: `v` (llamad's version), `llama` (llama-server's
build) and `tls` (0/1), so `fleet status --discover` can build a URL. zeroconf is
imported only inside the functions that use it: llamactl must stay fast without it.

Which sockets and addresses that takes is `mdns_net.py`'s business.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Any

import structlog

from llamad.common.hosts import is_loopback
from llamad.fleet.mdns_net import advertised_addresses, zeroconf_options

log = structlog.get_logger("llamad.discovery")

SERVICE_TYPE = "_llamad._tcp.local."
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
        # A loopback API advertises on loopback alone; any other, where mDNS reaches.
        zc = AsyncZeroconf(**(zeroconf_options(host) if is_loopback(host) else {}))
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

    # A one-shot querier (RFC 6762 5.1): answers come to a port of our own, not to a
    # 5353 shared with the system's responder, which could be handed them instead.
    zc = Zeroconf(unicast=True, **zeroconf_options(interface))
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
