"""llamad beside the proxies a user could put in front of llama-server instead, in one run.

One llamad runs two always-on instances (the tiny model and the paced model, 4 slots
each, one generation thread so a core stays free for the proxies) and an on-demand one.
nginx, LiteLLM's proxy and local-engine-router are started in front of the same two
llama-servers (bench/peer_procs.py); a peer that cannot run here is skipped with its
reason, printed and kept in results.json's notes. Rows, each against direct requests to
the same llama-server in the same run: added latency p50/p99, CPU per request, SSE time,
RSS at idle and after the run, a cold request's time to first byte for those that start
models on demand, throughput under concurrency and memory under a long run; then the
fleet path (bench/fleet_path.py): the same llamad as a `[fleet]` peer of another.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from bench import baseline, concurrency, fleet_path, peer_rows
from bench.common import Context, Result, instance_keys, wait_for
from bench.gateway import _direct_cold, _healthy, _unload
from bench.gateway_sse import PACED
from bench.peer_nginx import start_nginx
from bench.peer_procs import Unavailable, start_litellm, start_router, start_routers
from bench.procs import Daemon, floor_specs
from bench.targets import Target
from llamad.client.http import Client
from llamad.daemon.tinymodel import write_tiny_model

TINY, PACED_MODEL = "tiny", "paced"
STARTERS: dict[str, Callable[[Context, dict[str, int]], Target]] = {
    "nginx": start_nginx,
    "litellm": start_litellm,
    "local-engine-router": start_routers,
}
# llama-swap (Go) cannot be installed here; what it publishes, quoted, never measured.
NOT_MEASURED = {
    "llama-swap": "not measured (Go, not installable here); it publishes no overhead figures",
    "litellm (published)": "not measured here: its docs claim +3.25 ms added latency; an "
    "independent bench measured +4.34 ms (p50 6.03 vs 1.62 ms direct)",
}


def _instances(ctx: Context) -> dict[str, dict[str, object]]:
    paced = write_tiny_model(ctx.root / "paced.gguf", shape=PACED)
    lean = {"n_parallel": 4, "ctx_size": 1024, "threads": 1}
    return {
        TINY: {**instance_keys(ctx, ctx.port()), **lean},
        PACED_MODEL: {**instance_keys(ctx, ctx.port()), **lean, "model": paced},
        "cold": {**instance_keys(ctx, ctx.port()), "on_demand": True, "idle_timeout": 0.0},
    }


def _start_peers(ctx: Context, upstreams: dict[str, int]) -> list[Target]:
    peers = []
    for name, start in STARTERS.items():
        try:
            peers.append(start(ctx, upstreams))
        except (Unavailable, RuntimeError, TimeoutError, OSError) as exc:
            ctx.notes[f"peers: {name}"] = f"skipped: {exc}"
            print(f"# peers: {name} skipped: {exc}")
    return peers


def run(ctx: Context) -> list[Result]:
    """Every peer row, from one llamad and the peers in front of its llama-servers."""
    gw_port, control = ctx.port(), ctx.port()
    instances = _instances(ctx)
    # Its control API on TCP too: the fleet path's front llamad learns its models there.
    remote, read_token = fleet_path.remote_keys(ctx, control)
    daemon = Daemon(ctx, "peers", instances, gateway={"listen": f"127.0.0.1:{gw_port}"},
                    daemon={"remote": remote})  # fmt: skip
    peers: list[Target] = []
    try:
        daemon.wait_running([TINY, PACED_MODEL], timeout=60.0)
        wait_for(lambda: _healthy(gw_port), 30.0, "gateway answering")
        ports = {m: cast(int, instances[m]["port"]) for m in (TINY, PACED_MODEL)}
        direct = Target("direct", {m: f"http://127.0.0.1:{p}" for m, p in ports.items()})
        base = f"http://127.0.0.1:{gw_port}"
        llamad = Target("llamad", {TINY: base, PACED_MODEL: base, "cold": base},
                        {TINY: [daemon.proc.pid], PACED_MODEL: [daemon.proc.pid]})  # fmt: skip
        peers = [llamad, *baseline.peer_targets(ctx, instances), *_start_peers(ctx, ports)]
        for name, text in NOT_MEASURED.items():
            ctx.notes[f"peers: {name}"] = text
        rows = _measure(ctx, daemon, direct, peers, instances["cold"])
        rows += fleet_path.rows(ctx, direct, llamad, control, read_token, TINY, PACED_MODEL)
        return baseline.mark_peer_rows(ctx, rows)
    finally:
        for t in peers[1:]:
            t.stop()
        daemon.stop()


def _measure(ctx: Context, daemon: Daemon, direct: Target, peers: list[Target],
             cold: dict[str, object]) -> list[Result]:  # fmt: skip
    idle = {t.name: t.rss_mb(TINY) for t in peers}
    versions = {t.name: t.version for t in peers if t.version}
    ctx.notes["peers: versions"] = ", ".join(f"{k} {v}" for k, v in versions.items())
    rows = peer_rows.latency(ctx, direct, peers, TINY)
    cpu = peer_rows.cpu_per_request(ctx, peers, TINY)
    rows += [
        Result(f"peers: {name} CPU per request", 1, "us", [us], [0.0], "overhead", "none",
               None, "-")
        for name, us in cpu.items()
    ]  # fmt: skip
    rows += _against_nginx(rows, cpu)
    rows += peer_rows.sse(ctx, direct, peers, PACED_MODEL)
    rows += _cold(ctx, daemon, peers, cold)
    rows += concurrency.throughput(ctx, direct, peers, PACED_MODEL)
    rows += concurrency.soak(ctx, peers, TINY)
    rows += [
        Result(f"peers: {t.name} RSS after the run", 1, "MB", [t.rss_mb(TINY)], [idle[t.name]],
               "overhead", "none", None, "-")
        for t in peers
    ]  # fmt: skip
    return rows


def _against_nginx(rows: list[Result], cpu: dict[str, float]) -> list[Result]:
    """The issue's targets: llamad within nginx's added latency + 0.3 ms at p50, and its
    CPU per request within 3x nginx's, both measured in this run."""
    if "nginx" not in cpu:
        return []
    p50 = {r.name.split()[1]: r.overhead for r in rows if r.name.endswith("added latency p50")}
    return [
        Result("peers: llamad p50 against nginx's", 1, "ms", [p50["llamad"]], [p50["nginx"]],
               "overhead", "overhead", 0.3, "<= nginx +0.3 ms", "added latency at p50, each"),
        Result("peers: llamad CPU/req against nginx's", 1, "us", [cpu["llamad"]],
               [cpu["nginx"]], "ratio", "ratio", 3.0, "<= 3x nginx", "CPU per request, each"),
    ]  # fmt: skip


def _cold(
    ctx: Context, daemon: Daemon, peers: list[Target], keys: dict[str, object]
) -> list[Result]:
    """Time to first byte of a cold request, for llamad and local-engine-router (the peers
    that start a model on demand), against launching llama-server directly."""
    client = Client(daemon.socket)
    spec_keys = {k: v for k, v in keys.items() if k not in ("on_demand", "idle_timeout")}
    names = [t.name for t in peers]
    mine: dict[str, list[float]] = {n: [] for n in ("llamad", "local-engine-router") if n in names}
    direct = []
    for _ in range(ctx.reps(3, 1)):
        _unload(client)
        direct.append(_direct_cold(ctx, {**spec_keys, "port": ctx.port()}))
        start = time.perf_counter()
        mine["llamad"].append((peer_rows.first_byte(peers[0].port("cold"), "cold") - start) * 1e3)
        if "local-engine-router" in mine:
            mine["local-engine-router"].append(_router_cold(ctx, spec_keys))
    _unload(client)
    return [
        Result(f"peers: {name} cold TTFB", 1, "ms", ms, direct, "overhead", "none", None, "-")
        for name, ms in mine.items()
    ]  # fmt: skip


def _router_cold(ctx: Context, keys: dict[str, object]) -> float:
    """ms to a first byte from a fresh local-engine-router that must launch llama-server."""
    spec = floor_specs(ctx, {"cold": {**keys, "port": ctx.port()}})[0]
    llama_env = {k: v for k, v in spec.env.items() if k.startswith("LLAMA_")}
    router = start_router(ctx, "cold", spec.port, [str(ctx.binary), *spec.args], llama_env)
    try:
        start = time.perf_counter()
        return (peer_rows.first_byte(router.port("cold"), "cold") - start) * 1000
    finally:
        router.stop()
