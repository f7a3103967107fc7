"""Which hosts the gateway's fleet asks: `[fleet] peers`, then the tailnet peers carrying
`tailscale_tag`, then those `dns_name` resolves to, then (with `discover = true`) the
llamads mDNS finds.

A name or URL already taken keeps its first owner, so a configured peer always wins over
the same host found again; models.py also drops a host whose status document names a
daemon already asked (or this one). Discovered hosts use `[fleet] token_file` and
`gateway_key_file`, as llamactl does. Neither Tailscale, DNS nor mDNS can break the gateway:
a failure is logged once and the configured peers are still asked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from functools import lru_cache

import structlog

from llamad.config.remote import Remote
from llamad.fleet.browser import Browser
from llamad.fleet.dns_peers import DnsPeers, Source
from llamad.fleet.mdns_net import advertised_addresses
from llamad.fleet.peers import TailscaleError, tailnet
from llamad.fleet.table import Fleet, Peer

log = structlog.get_logger("llamad.gateway")

TAILSCALE_EVERY_S = 15.0  # `tailscale status --json` is a process: every third refresh
BROWSE_RETRY_S = 60.0  # an mDNS browser that could not start (no network yet) is tried again


class FleetHosts:
    """The peers of the current config plus those found, asked for at every refresh."""

    def __init__(
        self,
        fleet: Callable[[], Fleet],
        configured: Callable[[], Mapping[str, Peer]],
        remote: Callable[[], Remote | None],
    ) -> None:
        self.fleet = fleet  # each is read at every refresh: they follow reloads
        self.configured = configured
        self.remote = remote  # this daemon's control API: mDNS finds it too
        self._tailnet: list[Peer] = []
        self._tailnet_key: tuple[str | None, int] | None = None
        self._tailnet_at = 0.0
        self._tailnet_error: str | None = None
        self._dns: DnsPeers | None = None
        self._browser: Browser | None = None
        # The interface a browser was last started on, and when: one that failed to
        # start is tried again after BROWSE_RETRY_S, its failure logged once per spell.
        self._browse_on: str | None = None
        self._browse_tried = 0.0
        self._browse_error: str | None = None

    async def current(self) -> dict[str, Peer]:
        """Name -> peer: the configured ones, then each found one under a free name and URL."""
        fleet = self.fleet()
        peers = dict(self.configured())
        urls = {_url(p.url) for p in peers.values()}
        found = [*await self._tailscale(fleet), *await self._dns_peers(fleet)]
        for peer in [*found, *await self._mdns(fleet)]:
            if peer.name not in peers and _url(peer.url) not in urls:
                peers[peer.name] = fleet.with_defaults(peer)
                urls.add(_url(peer.url))
        return peers

    async def _tailscale(self, fleet: Fleet) -> list[Peer]:
        key = (fleet.tailscale_tag, fleet.tailscale_port)
        if fleet.tailscale_tag is None:
            self._tailnet, self._tailnet_key = [], key
            return []
        if key == self._tailnet_key and time.monotonic() - self._tailnet_at < TAILSCALE_EVERY_S:
            return self._tailnet
        self._tailnet_key, self._tailnet_at = key, time.monotonic()
        try:
            self._tailnet = await asyncio.to_thread(tailnet, fleet)  # a process: off the loop
        except TailscaleError as exc:
            self._tailnet = []
            if self._tailnet_error is None:  # once per failing spell, not every 15 s
                log.warning("gateway.tailscale_failed", error=str(exc))
            self._tailnet_error = str(exc)
        else:
            self._tailnet_error = None
        return self._tailnet

    async def _dns_peers(self, fleet: Fleet) -> list[Peer]:
        source = Source.of(fleet)
        if source is None:
            self._dns = None
            return []
        if self._dns is None or self._dns.source != source:
            self._dns = DnsPeers(source)
        return await self._dns.peers()

    async def _mdns(self, fleet: Fleet) -> list[Peer]:
        if self._browser is not None and (
            not fleet.discover or self._browser.interface != fleet.mdns_interface
        ):
            await self.close()
        if not fleet.discover:
            return []
        if self._browser is None:
            self._browser = await self._start_browser(fleet.mdns_interface)
            if self._browser is None:
                return []
        own = _own(self.remote())
        return [
            Peer(f.name, f.url, source="mdns")
            for f in await self._browser.found()
            if (f.address, f.port) not in own
        ]

    async def _start_browser(self, interface: str | None) -> Browser | None:
        now = time.monotonic()
        if interface == self._browse_on and now - self._browse_tried < BROWSE_RETRY_S:
            return None
        self._browse_on, self._browse_tried = interface, now
        browser = Browser(interface)
        try:
            await browser.start()
        except Exception as exc:  # ImportError, OSError: mDNS is a convenience
            await browser.close()
            if self._browse_error is None:
                log.warning("discovery.browse_failed", error=str(exc) or type(exc).__name__)
            self._browse_error = str(exc) or type(exc).__name__
            return None
        self._browse_error = None
        log.info("discovery.browsing", interface=interface or "all")
        return browser

    async def close(self) -> None:
        """Stop browsing mDNS (within the browser's deadline); a later refresh restarts it."""
        browser, self._browser, self._browse_tried = self._browser, None, 0.0
        if browser is not None:
            await browser.close()


def _url(url: str) -> str:
    return url.rstrip("/").lower()


def _own(remote: Remote | None) -> frozenset[tuple[str, int]]:
    """Where this daemon's own advertisement points: never a peer of its own gateway."""
    if remote is None or not remote.advertise:
        return frozenset()
    return _advertised(remote.host, remote.port)


@lru_cache(maxsize=4)
def _advertised(host: str, port: int) -> frozenset[tuple[str, int]]:
    return frozenset((a, port) for a in advertised_addresses(host))
