"""RPC workers on fleet peers: a head's `rpc = ["peer/worker"]`, asked for over TCP.

The peer's control API (`GET /v1/instances/WORKER`, with the peer's bearer token) says
whether the worker runs, its port and its pid. A head waits until each of its remote
workers runs, and is restarted when one of them gets a new pid or stops running, as
with local workers. A peer that cannot be asked never crashes anything: the head waits,
or (when already running) keeps running while the peer is away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import structlog

from llamad.backends import rpc
from llamad.common.hosts import is_loopback, is_wildcard
from llamad.fleet.peer_api import PeerUnreachable, get_json
from llamad.fleet.table import Peer

log = structlog.get_logger("llamad.rpc")

ASK_TIMEOUT_S = 2.0
LOCAL_POLL_S = 0.05  # local readiness is a dict lookup: poll it often
REMOTE_POLL_S = 0.5  # a request to another host: poll it less


@dataclass(frozen=True)
class Worker:
    """A remote worker seen running: where the head reaches it, and its pid then."""

    address: str
    pid: int


Found = dict[str, Worker]  # "peer/worker" -> Worker, in the head's `rpc` order


class RemoteWorkers:
    """Asks peers about workers; remembers the last answer per worker for status."""

    def __init__(self, peers: dict[str, Peer] | None = None) -> None:
        self.peers = peers or {}  # replaced on reload
        self.seen_running: dict[str, bool] = {}
        self._away: set[str] = set()  # peers in an outage, warned about once

    def follow(self, peers: dict[str, Peer]) -> None:
        """A reload's peers: asked from the next look on."""
        self.peers = peers

    def not_running(self, pairs: tuple[tuple[str, str], ...]) -> list[str]:
        """Which of `pairs` were not running when last asked (or never asked)."""
        names = [f"{peer}/{worker}" for peer, worker in pairs]
        return [n for n in names if not self.seen_running.get(n, False)]

    async def look(self, peer_name: str, worker: str) -> Worker | str:
        """The worker if it runs, else why not; PeerUnreachable if the peer can't say."""
        name = f"{peer_name}/{worker}"
        peer = self.peers.get(peer_name)
        try:
            if peer is None:  # gone from [fleet] in a reload this head has not seen yet
                raise PeerUnreachable(f"no [fleet] peer named {peer_name!r}")
            doc = await _ask(peer, worker)
        except PeerUnreachable as exc:
            self.seen_running[name] = False
            if peer_name not in self._away:
                self._away.add(peer_name)
                log.warning("rpc.peer_unreachable", peer=peer_name, error=str(exc))
            raise
        self._away.discard(peer_name)
        found = _worker(doc, peer.url) if doc is not None else f"no such instance on {peer_name}"
        self.seen_running[name] = isinstance(found, Worker)
        return found if isinstance(found, Worker) else f"{name} ({found})"

    async def wait(
        self,
        pairs: tuple[tuple[str, str], ...],
        local_ready: Callable[[], bool],
        mark: Callable[[str], None],
    ) -> Found:
        """Poll until the local workers are ready and every remote one runs; those found."""
        said = ""
        while True:
            if not local_ready():
                await asyncio.sleep(LOCAL_POLL_S)
                continue
            found: Found = {}
            for peer, worker in pairs:
                try:
                    seen = await self.look(peer, worker)
                except PeerUnreachable as exc:
                    seen = f"{peer}/{worker} (peer unreachable: {exc})"
                if isinstance(seen, str):
                    if seen != said:  # one mark per reason, not one per poll
                        mark(f"waiting for rpc worker {seen}")
                        said = seen
                    break
                found[f"{peer}/{worker}"] = seen
            else:
                return found
            await asyncio.sleep(REMOTE_POLL_S)

    async def watch(
        self, found: Found, interval: Callable[[], float], lost: Callable[[str], None]
    ) -> None:
        """While the head runs: call `lost(name)` once a worker restarts or stops running.

        An unreachable peer is no reason to restart: a head whose worker died anyway
        learns it from the new pid once the peer answers again.
        """
        while found:
            await asyncio.sleep(interval())
            for name, was in found.items():
                peer, worker = name.split("/", 1)
                try:
                    now = await self.look(peer, worker)
                except PeerUnreachable:
                    continue
                if not isinstance(now, Worker) or now.pid != was.pid:
                    lost(name)
                    return


async def _ask(peer: Peer, worker: str) -> dict[str, object] | None:
    """The peer's status entry for `worker`; None when it has no such instance."""
    path = f"/v1/instances/{quote(worker, safe='')}"
    doc = await get_json(peer.url, path, peer.token_file, peer.ca_file, ASK_TIMEOUT_S)
    if doc is not None and not isinstance(doc, dict):
        raise PeerUnreachable(f"{peer.url} answered something that is not an instance")
    return doc


def _worker(doc: dict[str, object], peer_url: str) -> Worker | str:
    state, pid, port = (doc.get(k) for k in ("state", "pid", "port"))
    if doc.get("kind") != rpc.KIND:
        return "not an rpc-worker"
    if state != "running" or not isinstance(pid, int) or not isinstance(port, int):
        return str(state)
    host = str(doc.get("host") or "")
    # The worker's own bind address when it names one interface beyond loopback; else
    # (loopback, wildcard) the peer's host as we reach it.
    if not _specific(host):
        host = urlsplit(peer_url).hostname or host
    return Worker(f"{host}:{port}", pid)


def _specific(host: str) -> bool:
    return not (is_loopback(host) or is_wildcard(host))
