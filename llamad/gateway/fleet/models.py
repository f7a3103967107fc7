"""The fleet behind the gateway: which models `[fleet]` peers serve, learnt from their
control API, and which peer a request for one of them goes to.

Each peer's document (`GET /v1/fleet`, with the peer's read token; `/v1/status` from a
llamad without that route) names its gateway's port and its routable models with their
state; requests go to that port on the host whose control API answered, never to a host
the document names. It is asked every REFRESH_S seconds, and at once when a request
names a model no one is known to serve, with the ETag of its last answer: a peer where
nothing changed answers 304, and what it said last stands. A peer whose document did not
change is asked half as often each time, down to every UNCHANGED_MAX_S, until it
changes; a miss still asks every peer at once. N llamads make N x (N - 1) asks.
A peer that stops answering keeps its last known models, marked away, so a request for
one of them gets a 503 naming the host instead of a 404.

Peers come from hosts.py. A status document from this very daemon, or from one a
better-ranked source reached too, adds nothing: no routing to itself, no host twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import structlog

from llamad.common.tokenfile import TokenFileError, read_token
from llamad.fleet.peer_api import Fetched, PeerUnreachable, fetch
from llamad.fleet.peers import identity
from llamad.fleet.table import Peer
from llamad.gateway.fleet.peer_models import RemoteModel, models_of, room_left

log = structlog.get_logger("llamad.gateway")

REFRESH_S = 5.0
UNCHANGED_MAX_S = 30.0  # the longest a peer that keeps answering 304 goes unasked
ASK_TIMEOUT_S = 2.0
MISS_REFRESH_GAP_S = 1.0  # a storm of unknown names asks the peers at most this often
# Which source keeps a host found twice.
RANK = {"config": 0, "tailscale": 1, "dns": 2, "mdns": 3}

Identity = tuple[object, ...]


@dataclass
class PeerModels:
    """What one peer said last: its gateway and models; `error` while it is away."""

    peer: Peer
    gateway_url: str | None = None
    models: dict[str, RemoteModel] = field(default_factory=dict)  # every name and alias
    left_bytes: int | None = None
    error: str | None = None
    asked_at: float = 0.0
    identity: Identity | None = None  # the daemon that answered (peers.identity)
    etag: str | None = None  # of the document these models were read from
    legacy: bool = False  # a llamad without `/v1/fleet`: its whole status is asked
    every: float = REFRESH_S  # how often it is asked now: longer while nothing changes
    due: float = 0.0  # monotonic time of its next ask in a background round

    def key(self) -> str | None:
        """The peer gateway's key, read when needed (it may be rotated on disk)."""
        if self.peer.gateway_key_file is None:
            return None
        try:
            return read_token(self.peer.gateway_key_file)
        except TokenFileError:
            return None


class FleetModels:
    """The peers' models, refreshed in the background and on a miss."""

    def __init__(
        self,
        peers: Callable[[], Awaitable[Mapping[str, Peer]]],
        local: Callable[[str], bool],
        me: Identity | None = None,
        sender: str = "-",
    ) -> None:
        self.peers = peers  # asked at every refresh: follows reloads and discovery
        # Whether a name is one of this llamad's instances' own (`Router.owns`): that
        # name reaches that instance alone, whatever a peer says it serves.
        self.local = local
        self.me = me  # this daemon's identity: a peer that turns out to be us is skipped
        self.sender = sender  # this gateway's id in peers' `relayed` counts
        self.seen: dict[str, PeerModels] = {}
        self._last_miss = 0.0
        self._refreshing: asyncio.Future[None] | None = None
        self._everyone = True  # whether the round under way asks every peer

    async def run(
        self,
        enabled: Callable[[], bool],
        disabled: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Refresh every REFRESH_S while `enabled()`, else call `disabled` (it may free
        what finding peers holds, such as an mDNS browser); cancel to stop."""
        while True:
            if enabled():
                await self.refresh(everyone=False)
            elif disabled is not None:
                await disabled()
            await asyncio.sleep(REFRESH_S)

    async def refresh(self, everyone: bool = True) -> None:
        """Ask every peer at once, or (not `everyone`) those whose turn has come;
        concurrent callers share one round, but a call for every peer does not settle
        for a round of those due."""
        while everyone and not self._everyone and (under_way := self._round()) is not None:
            await asyncio.shield(under_way)
        under_way = self._round()
        if under_way is None:
            self._everyone = everyone
            under_way = self._refreshing = asyncio.ensure_future(self._ask_all(everyone))
        await asyncio.shield(under_way)

    def _round(self) -> asyncio.Future[None] | None:
        """The round under way, if any."""
        under_way = self._refreshing
        return under_way if under_way is not None and not under_way.done() else None

    async def close(self) -> None:
        """Cancel a refresh under way: run() only stops waiting for it (it is shared)."""
        if self._refreshing is not None and not self._refreshing.done():
            self._refreshing.cancel()
            await asyncio.wait({self._refreshing})

    async def _ask_all(self, everyone: bool) -> None:
        peers = dict(await self.peers())
        for gone in set(self.seen) - set(peers):
            del self.seen[gone]
        # Half a round early counts as due: rounds start REFRESH_S apart, give or take.
        soon = time.monotonic() + REFRESH_S / 2
        due = [p for p in peers.values() if everyone or self._due(p.name) <= soon]
        await asyncio.gather(*(self._ask(p) for p in due))
        self._drop_duplicates()

    async def _ask(self, peer: Peer) -> None:
        entry = self.seen.setdefault(peer.name, PeerModels(peer))
        entry.peer = peer
        if peer.error is not None:  # offline in Tailscale: known away without asking
            self.mark_away(peer.name, peer.error)
            return
        try:
            got = await self._document(entry)
        except PeerUnreachable as exc:
            self.mark_away(peer.name, str(exc))
            return
        entry.asked_at = time.monotonic()
        if entry.error is not None:
            log.info("gateway.peer_back", peer=peer.name)
        entry.error = None
        unchanged = got.status == 304  # what it said last stands
        entry.every = min(entry.every * 2, UNCHANGED_MAX_S) if unchanged else REFRESH_S
        entry.due = entry.asked_at + entry.every
        if unchanged:
            return
        doc, entry.etag = got.doc, got.etag
        entry.identity = identity(doc) if isinstance(doc, dict) else None
        gateway = doc.get("gateway") if isinstance(doc, dict) else None
        if entry.identity is not None and entry.identity == self.me:
            gateway = None  # this very daemon (found by mDNS, say): routing there would loop
        if not isinstance(gateway, dict) or not isinstance(gateway.get("listen"), str):
            entry.gateway_url, entry.models = None, {}
            return
        entry.gateway_url = _gateway_url(gateway["listen"], peer.url)
        entry.left_bytes = room_left(gateway)
        entry.models = models_of(doc.get("instances"), self.sender)

    async def _document(self, entry: PeerModels) -> Fetched:
        """The peer's document, conditional on what it said last; from an older llamad
        (a 404 for `/v1/fleet`), its whole status document, then and from now on."""
        peer = entry.peer
        if not entry.legacy:
            got = await fetch(
                peer.url, "/v1/fleet", peer.token_file, peer.ca_file, ASK_TIMEOUT_S, entry.etag
            )
            if got.status != 404:
                return got
            entry.legacy = True
        return await fetch(peer.url, "/v1/status", peer.token_file, peer.ca_file, ASK_TIMEOUT_S)

    def _due(self, name: str) -> float:
        entry = self.seen.get(name)
        return 0.0 if entry is None or entry.error is not None else entry.due

    def _drop_duplicates(self) -> None:
        """One entry per daemon: the one from the best-ranked source keeps its models."""
        kept: set[Identity] = set()
        for entry in sorted(self.seen.values(), key=lambda e: RANK.get(e.peer.source, 4)):
            if entry.identity is None or entry.error is not None:
                continue
            if entry.identity in kept:
                # Asked in full next time: should the other go, this one takes over.
                entry.gateway_url, entry.models, entry.etag = None, {}, None
            kept.add(entry.identity)

    def mark_away(self, peer: str, error: str) -> None:
        """`peer` did not answer: its models stay known, but nothing is sent there."""
        entry = self.seen.get(peer)
        if entry is None:
            return
        if entry.error is None:
            log.warning("gateway.peer_unreachable", peer=peer, error=error)
        entry.error = error

    def models(self) -> list[tuple[PeerModels, RemoteModel]]:
        """Every model a reachable peer serves, once per peer (not per alias)."""
        return [
            (entry, model)
            for entry in self.seen.values()
            if entry.error is None and entry.gateway_url
            for key, model in entry.models.items()
            if key == model.name
        ]

    async def pick(self, name: str) -> tuple[PeerModels, RemoteModel] | list[PeerModels]:
        """The peer to send `name` to: one where it is loaded, then the one with the most
        free memory budget. Without one: the away peers that served it (maybe none)."""
        found = self.candidates(name)
        if not found and time.monotonic() - self._last_miss > MISS_REFRESH_GAP_S:
            self._last_miss = time.monotonic()
            await self.refresh()
            found = self.candidates(name)
        if found:
            return max(found, key=lambda c: (c[1].loaded, c[0].left_bytes or 0))
        return [e for e in self.seen.values() if e.error is not None and name in e.models]

    def candidates(self, name: str) -> list[tuple[PeerModels, RemoteModel]]:
        """Every reachable peer serving `name`, with its model as it said last; none for
        a local instance's own name."""
        if self.local(name):
            return []
        return [
            (entry, entry.models[name])
            for entry in self.seen.values()
            if entry.error is None and entry.gateway_url and name in entry.models
        ]


def _gateway_url(listen: str, peer_url: str) -> str | None:
    """The peer's gateway as we reach it: on the host whose control API answered (the
    configured URL, the tailnet address, or where its mDNS advertisement pointed), at the
    port its gateway listens on. The host it names is never used: a peer must not send
    our requests, its key and our clients' prompts to an address of its choosing."""
    _, _, port = listen.rpartition(":")
    host = urlsplit(peer_url).hostname
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return f"http://[{host}]:{int(port)}" if ":" in host else f"http://{host}:{int(port)}"
