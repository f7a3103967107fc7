"""The daemon's standing mDNS browser (`[fleet] discover = true`): the llamads that
advertise `_llamad._tcp`, kept current in the daemon's own event loop.

llamactl's `browse()` (discovery.py) asks once and waits; a daemon keeps listening, so
hosts that come and go are seen at the next fleet refresh without a second of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from llamad.common.hosts import is_loopback
from llamad.fleet.discovery import SERVICE_TYPE, Found, parse_txt
from llamad.fleet.mdns_net import local_addresses, zeroconf_options

RESOLVE_MS = 300  # answers to the browse usually carry SRV, TXT and A: then it is at once
CLOSE_S = 2.0  # goodbyes and socket teardown are a courtesy; shutdown is not


class Browser:
    """A ServiceBrowser for `_llamad._tcp` on `interface` (None: every interface)."""

    def __init__(self, interface: str | None) -> None:
        self.interface = interface
        self._names: set[str] = set()
        self._zc: Any = None  # AsyncZeroconf; zeroconf is imported by start() only
        self._browser: Any = None

    async def start(self) -> None:
        """Start browsing; raises ImportError without zeroconf, OSError without sockets."""
        from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf

        interface = self.interface
        # Checked first: zeroconf fails later, after binding a socket it leaves open.
        if interface and not is_loopback(interface) and interface not in local_addresses():
            raise OSError(f"no interface of this machine has the address {interface}")
        self._zc = AsyncZeroconf(**zeroconf_options(interface))
        self._browser = AsyncServiceBrowser(
            self._zc.zeroconf, SERVICE_TYPE, handlers=[self._changed]
        )

    def _changed(self, zeroconf: Any, service_type: str, name: str, state_change: Any) -> None:
        from zeroconf import ServiceStateChange

        if state_change is ServiceStateChange.Removed:
            self._names.discard(name)
        else:
            self._names.add(name)

    async def found(self) -> list[Found]:
        """The llamads advertising now, with an address and a port, by name."""
        if self._zc is None:
            return []
        names = sorted(self._names)
        found = await asyncio.gather(*(self._resolve(name) for name in names))
        return [f for f in found if f is not None]

    async def _resolve(self, name: str) -> Found | None:
        from zeroconf.asyncio import AsyncServiceInfo

        info = AsyncServiceInfo(SERVICE_TYPE, name)
        if not await info.async_request(self._zc.zeroconf, RESOLVE_MS):
            return None
        addresses = info.parsed_addresses()
        if not info.port or not addresses:
            return None
        return parse_txt(name, addresses[0], info.port, info.properties)

    async def close(self) -> None:
        """Stop browsing and free the sockets, within CLOSE_S."""
        browser, zc, self._browser, self._zc = self._browser, self._zc, None, None
        with contextlib.suppress(Exception):  # TimeoutError included: give up, move on
            async with asyncio.timeout(CLOSE_S):
                if browser is not None:
                    await browser.async_cancel()
                if zc is not None:
                    await zc.async_close()
