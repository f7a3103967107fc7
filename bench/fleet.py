"""The fleet as one machine: replicas of one model on two llamads behind a third.

B and C each serve the paced model (one generation thread each, as on two machines
that share nothing) with their control API on TCP; front gateways A1 (peer B) and A2
(peers B and C) route to them. Rows: throughput through A1 and A2 at 8 and 32 clients
(the same requests, so the wall times compare); TTFT and `timings.cache_n` per turn of
three interleaved 20-turn conversations with a long system prompt, through A2 with
prompt affinity and without (the `x-llamad-affinity: off` header); and the latency a
fleet hop adds (1-token completions through A1 against B's own gateway). Then the same
throughput for two local replicas, one llamad with two instances sharing an alias
(`fleet_local.py`).
"""

from __future__ import annotations

import secrets
import statistics
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import fleet_chat, fleet_local, replica_throughput
from bench.common import Context, Result, wait_for
from bench.gateway import latency_pair
from bench.gateway_sse import PACED
from bench.procs import Daemon
from bench.replica_throughput import Way
from llamad.daemon.tinymodel import write_tiny_model

MODEL, CHAT = "paced", "chat"
READ = "fleet-bench-read-token-" + "r" * 24
JUDGED = 1.6  # two replicas against one, at 32 clients


@dataclass
class Peer:
    """A replica's daemon, its control API's port and the read token file for it."""

    daemon: Daemon
    control: int
    read: Path


def _replica(ctx: Context, name: str) -> Peer:
    """A llamad serving MODEL (4 slots) and CHAT (long slots), one thread each."""
    paced = write_tiny_model(ctx.root / "paced.gguf", shape=PACED)
    chat = write_tiny_model(ctx.root / "chat.gguf", shape=fleet_chat.SHAPE)
    slots = fleet_chat.SLOTS
    instances = {
        MODEL: {"model": paced, "threads": 1, "port": ctx.port(), "n_parallel": 4,
                "ctx_size": 1024},
        CHAT: {"model": chat, "threads": 1, "port": ctx.port(), "n_parallel": slots,
               "ctx_size": slots * fleet_chat.CTX},
    }  # fmt: skip
    read, admin = ctx.root / f"{name}-read.token", ctx.root / f"{name}-admin.token"
    for path, token in ((read, READ), (admin, secrets.token_hex(24))):
        path.write_text(token + "\n")
        path.chmod(0o600)
    gw, ctl = ctx.port(), ctx.port()
    remote = {"listen": f"127.0.0.1:{ctl}", "read_token_file": read, "token_file": admin}
    daemon = Daemon(ctx, name, instances, gateway={"listen": f"127.0.0.1:{gw}"},
                    daemon={"remote": remote})  # fmt: skip
    return Peer(daemon, ctl, read)


def _front(ctx: Context, name: str, peers: dict[str, Peer]) -> tuple[Daemon, str]:
    """A gateway with no model of its own, routing to `peers`."""
    gw = ctx.port()
    entries: list[object] = [
        {"name": n, "url": f"http://127.0.0.1:{p.control}", "token_file": p.read}
        for n, p in peers.items()
    ]
    daemon = Daemon(ctx, name, {}, gateway={"listen": f"127.0.0.1:{gw}", "fleet": True},
                    tables={"fleet": {"peers": entries}})  # fmt: skip
    return daemon, f"http://127.0.0.1:{gw}"


def run(ctx: Context) -> list[Result]:
    """Every fleet row, from two replicas and two fronts started once; then the local
    replicas' rows (`fleet_local`), on a llamad of their own."""
    started: list[Daemon] = []
    try:
        b, c = _replica(ctx, "fleet-b"), _replica(ctx, "fleet-c")
        started += [b.daemon, c.daemon]
        for peer in (b, c):
            peer.daemon.wait_running([MODEL, CHAT], timeout=120.0)
        a1, url1 = _front(ctx, "fleet-a1", {"b": b})
        a2, url2 = _front(ctx, "fleet-a2", {"b": b, "c": c})
        started += [a1, a2]
        for url, count in ((url1, 1), (url2, 2)):
            wait_for(lambda u=url, n=count: _replicas(u) == n, 60.0, f"{url} seeing {count}")  # type: ignore[misc]
        one, two = Way(url1, MODEL), Way(url2, MODEL)
        rows = replica_throughput.rows(ctx, "fleet", one, two, JUDGED)
        rows += fleet_chat.rows(ctx, url2)
        rows += _hop(ctx, url1, b.daemon)
    finally:
        for daemon in reversed(started):
            daemon.stop()
    return rows + fleet_local.rows(ctx)


def _replicas(url: str) -> int:
    """How many replicas of MODEL the gateway at `url` lists (0 before it knows any)."""
    try:
        data = httpx.get(f"{url}/v1/models", timeout=2).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError):
        return 0
    found = [m for m in data if m["id"] == MODEL]
    return len(found[0]["llamad"]["replicas"]) if found else 0


def _hop(ctx: Context, front: str, b: Daemon) -> list[Result]:
    """1-token completions through A1 (one hop to B's gateway) against B's gateway."""
    b_port = int(str((b.gateway or {})["listen"]).rsplit(":", 1)[1])
    a_port = int(front.rsplit(":", 1)[1])
    ours, floor = latency_pair(ctx, b_port, a_port, {"model": MODEL}, {"model": MODEL})
    return [
        Result(f"fleet: hop added latency p{q}", len(ours), "ms", [_q(ours, q)], [_q(floor, q)],
               "overhead", "none", None, "-", "1-token completion via a front gateway; "
               "floor: the same to the replica's own gateway")
        for q in (50, 99)
    ]  # fmt: skip


def _q(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
