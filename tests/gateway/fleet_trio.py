"""Three real daemons on loopback for replicas: B and C each serve `shared` (two slots)
behind a keyed gateway with control on TCP; A serves `solo` and routes to both."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import replica_helpers
from fleet_helpers import Host, peer_entry, peer_tables, start, toml
from helpers import free_port, short_dir, wait_for

SLOTS = 2
# One generation thread each: two servers spinning all their threads on 2 cores starve
# each other, which is the machine's limit, not the balancer's.
SHARED = {"ctx_size": 2048, "n_parallel": SLOTS, "threads": 1, "context_shift": True}


@dataclass
class Replica:
    """A peer daemon serving `shared`, and how to start it again after a kill."""

    host: Host
    text: str
    gateway_port: int

    def restart(self) -> None:
        """Start the daemon again on the same config (same ports, same state dir)."""
        self.host.ld = start(self.host.dir, self.text, self.gateway_port, ["shared"])


def start_replica(tiny_model: Path) -> Replica:
    """A daemon serving `shared` with SLOTS slots behind its keyed gateway."""
    base = short_dir()
    gw, ctl = free_port(), free_port()
    text = toml(
        {
            **peer_tables(base, gw, ctl),
            "instances.shared": {"model": tiny_model, "port": free_port(), **SHARED},
        }
    )
    ld = start(base, text, gw, ["shared"])
    return Replica(Host(ld, f"http://127.0.0.1:{gw}", f"http://127.0.0.1:{ctl}", base), text, gw)


def start_front(tiny_model: Path, peers: dict[str, Host], **gateway: object) -> Host:
    """A: `solo` of its own, `fleet = true`, and the replicas as `[fleet]` peers."""
    base, gw = short_dir(), free_port()
    keys = base / "keys"
    keys.mkdir()
    entries = [peer_entry(name, str(host.control), keys) for name, host in peers.items()]
    text = toml(
        {
            "daemon": {"state_dir": base / "state"},
            "gateway": {"listen": f"127.0.0.1:{gw}", "fleet": True, **gateway},
            "instances.solo": {
                "model": tiny_model,
                "port": free_port(),
                "ctx_size": 256,
                "n_parallel": 1,
            },
        },
        entries,
    )
    ld = start(base, text, gw, ["solo"])
    front = Host(ld, f"http://127.0.0.1:{gw}", dir=base)
    wait_for(
        lambda: front.models().get("shared", {}).get("llamad", {}).get("replicas") == list(peers),
        20,
        "A learning both replicas",
    )
    return front


@contextmanager
def trio(tiny_model: Path, **gateway: object) -> Iterator[tuple[Host, Replica, Replica]]:
    """A in front of replicas B and C; every daemon closed on the way out."""
    b = start_replica(tiny_model)
    c: Replica | None = None
    a: Host | None = None
    try:
        c = start_replica(tiny_model)
        a = start_front(tiny_model, {"b": b.host, "c": c.host}, **gateway)
        yield a, b, c
    finally:
        for daemon in (a, c and c.host, b.host):
            if daemon is not None:
                daemon.ld.close()


def activity(front: Host, count: int) -> list[dict[str, Any]]:
    """A's last activity records, once at least `count` requests ended (oldest first)."""
    return replica_helpers.activity(front.gateway, count)
