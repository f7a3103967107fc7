"""Peers from DNS (`[fleet] dns_name`): the llamads behind a Kubernetes headless Service.

A headless Service has one A/AAAA record per ready pod, and SRV records
(`_PORTNAME._tcp.NAME`) that carry the port too; records follow readiness, so the
name is asked again as pods come and go: every `dns_interval` seconds, else as long as
the answer's TTL says (CoreDNS gives a headless Service's records 5 s). A name that
starts with `_` is an SRV name; any other is asked for A and AAAA, its peers at
`dns_port`. dnspython asks `dns_server`, else the system's resolvers (with their search
domains, so a pod may name its Service by `NAME.NAMESPACE`).

Failures never break the fleet: a server that does not answer leaves the last known
peers in place and is logged once per failing spell; a name with no records (no pod
ready) is no peers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import structlog

from llamad.fleet.table import Fleet, Peer, nameserver

log = structlog.get_logger("llamad.fleet")

DEFAULT_INTERVAL_S = 5.0  # CoreDNS's TTL for a headless Service; when the answer has none
MIN_INTERVAL_S = 1.0  # a TTL of 0 must not turn every refresh into a query
MAX_INTERVAL_S = 60.0  # a long TTL must not hide a pod that left for minutes
LIFETIME_S = 2.0  # one name's whole resolution, retries included


class DnsFailed(Exception):
    """The name could not be resolved (no server answered, a refusal); says why."""


@dataclass(frozen=True)
class Source:
    """What `[fleet]` asks DNS for; a change of any of it starts afresh."""

    name: str
    port: int
    server: tuple[str, int] | None
    interval: float | None

    @classmethod
    def of(cls, fleet: Fleet) -> Source | None:
        """The fleet's DNS source; None without `dns_name`."""
        if fleet.dns_name is None:
            return None
        server = nameserver(fleet.dns_server) if fleet.dns_server else None
        return cls(fleet.dns_name, fleet.dns_port, server, fleet.dns_interval)


class DnsPeers:
    """The peers `source` names now, resolved again once their interval has passed."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._resolver: Any = None  # dns.asyncresolver.Resolver, made by the first ask
        self._peers: list[Peer] = []
        self._due = 0.0
        self._error: str | None = None

    async def peers(self) -> list[Peer]:
        """The peers as last resolved, asking again first when they are due."""
        if time.monotonic() < self._due:
            return self._peers
        try:
            peers, ttl = await self._resolve()
        except DnsFailed as exc:
            # Kept: a resolver's hiccup must not empty the fleet; a pod that is gone
            # shows as away when it stops answering.
            if self._error is None:
                log.warning("fleet.dns_failed", name=self.source.name, error=str(exc))
            self._error = str(exc)
            ttl = None
        else:
            if self._error is not None or _names(peers) != _names(self._peers):
                log.info("fleet.dns_peers", name=self.source.name, peers=_names(peers))
            self._peers, self._error = peers, None
        self._due = time.monotonic() + self._interval(ttl)
        return self._peers

    def _interval(self, ttl: int | None) -> float:
        if self.source.interval is not None:
            return self.source.interval
        if ttl is None:
            return DEFAULT_INTERVAL_S
        return min(max(float(ttl), MIN_INTERVAL_S), MAX_INTERVAL_S)

    async def _resolve(self) -> tuple[list[Peer], int | None]:
        """The peers and the shortest TTL among the records that named them."""
        if self._resolver is None:
            self._resolver = await _resolver(self.source.server)
        name = self.source.name
        if name.startswith("_"):
            srv, ttl = await self._ask(name, "SRV")
            targets = sorted({(str(r.target), int(r.port)) for r in srv})
            found = await asyncio.gather(*(self._addresses(t) for t, _ in targets))
            peers = [
                _peer(target.split(".")[0], addresses[0], port)
                for (target, port), (addresses, _) in zip(targets, found, strict=True)
                if addresses
            ]
            return peers, _least([ttl, *(t for _, t in found)])
        addresses, ttl = await self._addresses(name)
        return [_peer(a, a, self.source.port) for a in addresses], ttl

    async def _addresses(self, name: str) -> tuple[list[str], int | None]:
        (v4, ttl4), (v6, ttl6) = await asyncio.gather(self._ask(name, "A"), self._ask(name, "AAAA"))
        addresses = sorted({r.address for r in v4}) + sorted({r.address for r in v6})
        return addresses, _least([ttl4, ttl6])

    async def _ask(self, name: str, rdtype: str) -> tuple[list[Any], int | None]:
        """The records of `rdtype` at `name` and their TTL; none (and no TTL) where the
        name or the type has none."""
        import dns.exception
        import dns.resolver

        try:
            answer = await self._resolver.resolve(
                name,
                rdtype,
                search=self.source.server is None,  # the system's search domains
                lifetime=LIFETIME_S,
                raise_on_no_answer=False,
            )
        except dns.resolver.NXDOMAIN:
            return [], None
        except dns.exception.DNSException as exc:
            raise DnsFailed(str(exc) or type(exc).__name__) from None
        if answer.rrset is None:
            return [], None
        return list(answer.rrset), answer.rrset.ttl


async def _resolver(server: tuple[str, int] | None) -> Any:
    """dnspython's resolver on `server`, else on the system's configuration; DnsFailed
    when there is none to read (no /etc/resolv.conf)."""
    import dns.asyncresolver
    import dns.exception

    try:
        if server is None:
            return dns.asyncresolver.Resolver()
        # An address is used as it is: the resolver passed for names is never asked.
        unused = dns.asyncresolver.Resolver(configure=False)
        return await dns.asyncresolver.make_resolver_at(server[0], server[1], resolver=unused)
    except (dns.exception.DNSException, OSError) as exc:
        raise DnsFailed(f"no resolver configuration: {exc}") from None


def _peer(label: str, address: str, port: int) -> Peer:
    host = f"[{address}]" if ":" in address else address
    shown = f"[{label}]" if ":" in label else label
    return Peer(f"{shown}:{port}", f"http://{host}:{port}", source="dns")


def _least(ttls: list[int | None]) -> int | None:
    known = [t for t in ttls if t is not None]
    return min(known) if known else None


def _names(peers: list[Peer]) -> list[str]:
    return [p.name for p in peers]
