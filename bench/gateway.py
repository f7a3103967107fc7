"""The gateway against direct requests to the same llama-server, in the same run.

Added latency of a 1-token completion (p50, p99), SSE throughput, 100 concurrent
streams, a cold request's time to first byte against starting llama-server directly,
and 20 concurrent cold requests starting exactly one process.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import time
from typing import cast

import httpx
import psutil

from bench.common import Context, Result, instance_keys, wait_for
from bench.gateway_sse import sse_instances, sse_rows
from bench.procs import Daemon, floor_specs, launch_direct, stop_direct
from bench.targets import cpu_seconds
from llamad.client.http import Client

ONE_TOKEN = {"prompt": "hi", "max_tokens": 1, "temperature": 0}


def _post(conn: http.client.HTTPConnection, path: str, body: dict[str, object]) -> float:
    """Milliseconds for one POST on a kept-alive connection, read to the end."""
    data = json.dumps(body).encode()
    start = time.perf_counter()
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    took = (time.perf_counter() - start) * 1000
    if resp.status != 200:
        raise RuntimeError(f"POST {path}: HTTP {resp.status}")
    return took


def _latency(
    ctx: Context, direct: int, gateway: int, model: str
) -> tuple[list[float], list[float]]:
    """Interleaved 1-token completions, direct and through the gateway (ms)."""
    return latency_pair(ctx, direct, gateway, {}, {"model": model})


def latency_pair(
    ctx: Context, floor_port: int, our_port: int, floor_keys: dict[str, str],
    our_keys: dict[str, str],
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Interleaved 1-token completions to two ports (ms): (ours, floor)."""
    d = http.client.HTTPConnection("127.0.0.1", floor_port, timeout=30)
    g = http.client.HTTPConnection("127.0.0.1", our_port, timeout=30)
    ours: list[float] = []
    floor: list[float] = []
    for i in range(ctx.reps(400, 100) + 20):
        a = _post(d, "/v1/completions", {**ONE_TOKEN, **floor_keys})
        b = _post(g, "/v1/completions", {**ONE_TOKEN, **our_keys})
        if i >= 20:  # warm-up: connections, caches
            floor.append(a)
            ours.append(b)
    d.close()
    g.close()
    return ours, floor


def _cpu_per_request(ctx: Context, daemon: Daemon, gateway: int) -> float:
    """Microseconds of the daemon's CPU per relayed 1-token completion."""
    proc = psutil.Process(daemon.proc.pid)
    conn = http.client.HTTPConnection("127.0.0.1", gateway, timeout=30)
    n = ctx.reps(400, 100)
    before = cpu_seconds(proc)
    for _ in range(n):
        _post(conn, "/v1/completions", {**ONE_TOKEN, "model": "hot"})
    conn.close()
    return (cpu_seconds(proc) - before) / n * 1e6


def _latency_rows(ctx: Context, gw_port: int, ports: dict[str, int]) -> list[Result]:
    """p50 and p99 of the added latency. Judged with one generation thread, as for SSE:
    on 2 cores, llama-server's compute threads on both (they spin between tokens) leave
    the gateway's process waiting for a core now and then, which shows at p99."""
    rows = []
    for model, judged in (("tiny-lean", True), ("hot", False)):
        ours, floor = _latency(ctx, ports[model], gw_port, model)
        where = "one generation thread" if judged else "llama-server on every core"
        for q, limit in ((50, 1.0), (99, 3.0)):
            rows.append(
                Result(
                    f"gateway added latency p{q}, {where}", len(ours), "ms", [_p(ours, q)],
                    [_p(floor, q)], "overhead", "overhead" if judged else "none", limit,
                    f"<= +{limit:g} ms" if judged else "-",
                    "1-token completion, keep-alive; floor: the same request direct",
                )
            )  # fmt: skip
    return rows


def _p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q) - 1]


async def _concurrent(base: str, model: str, n: int, tokens: int) -> list[bool]:
    """`n` streams at once; True for each that ended with [DONE]."""
    body = {"model": model, "prompt": "hi", "max_tokens": tokens, "stream": True}
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def one() -> bool:
            text = b""
            async with client.stream("POST", f"{base}/v1/completions", json=body) as r:
                async for chunk in r.aiter_bytes():
                    text += chunk
            return r.status_code == 200 and text.rstrip().endswith(b"data: [DONE]")

        return list(await asyncio.gather(*(one() for _ in range(n))))


def _first_byte(port: int, body: dict[str, object]) -> float:
    """Seconds until the first byte of a streamed answer (the clock started by the caller)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read(1)
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"cold request: HTTP {resp.status}")
    return time.perf_counter()


def _direct_cold(ctx: Context, keys: dict[str, object]) -> float:
    """ms from launching llama-server directly (polled every 5 ms) to a first byte."""
    spec = floor_specs(ctx, {"x": keys})[0]
    procs = []
    try:
        start = time.perf_counter()
        procs.append(launch_direct(ctx, spec, ctx.root / "gateway-direct.log"))
        conn_ok = wait_for(lambda: _healthy(spec.port), 30.0, "direct llama-server ready")
        del conn_ok
        return (_first_byte(spec.port, {**ONE_TOKEN, "stream": True}) - start) * 1000
    finally:
        stop_direct(procs)


def _healthy(port: int) -> bool | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/health")
        ok = conn.getresponse().status == 200
        conn.close()
    except OSError:
        return None
    if not ok:
        time.sleep(0.005)
    return ok or None


def run(ctx: Context) -> list[Result]:
    """Every gateway figure, from one daemon with always-on models and an on-demand one."""
    hot_port, cold_port, gw_port = ctx.port(), ctx.port(), ctx.port()
    hot = {**instance_keys(ctx, hot_port), "n_parallel": 4, "ctx_size": 1024}
    cold = {**instance_keys(ctx, cold_port), "on_demand": True, "idle_timeout": 0.0}
    instances = {"hot": hot, "cold": cold, **sse_instances(ctx)}
    daemon = Daemon(ctx, "gateway", instances, gateway={"listen": f"127.0.0.1:{gw_port}"})
    base = f"http://127.0.0.1:{gw_port}"
    results: list[Result] = []
    try:
        daemon.wait_running([n for n in instances if n != "cold"], timeout=60.0)
        wait_for(lambda: _healthy(gw_port), 30.0, "gateway answering")
        ports = {name: cast(int, keys["port"]) for name, keys in instances.items()}
        results += _latency_rows(ctx, gw_port, ports)
        results.append(
            Result(
                "gateway CPU per request", 1, "us", [_cpu_per_request(ctx, daemon, gw_port)],
                [0.0], "overhead", "none", None, "-",
                "the daemon's user+system CPU per relayed 1-token completion",
            )
        )  # fmt: skip
        results += sse_rows(ctx, daemon.proc.pid, gw_port, ports)
        complete = asyncio.run(_concurrent(base, "hot", 100, 8))
        results.append(
            Result(
                "gateway concurrent streams", 100, "req", [float(sum(complete))], [100.0],
                "overhead", "none", None, "all 100 complete", also_ok=all(complete),
            )
        )  # fmt: skip
        results += _cold(ctx, daemon, gw_port, cold)
    finally:
        daemon.stop()
    return results


def _cold(ctx: Context, daemon: Daemon, gw_port: int, keys: dict[str, object]) -> list[Result]:
    client = Client(daemon.socket)
    mine, direct = [], []
    # The direct floor gets a port of its own: the daemon's instance may be up meanwhile.
    floor_keys = {**{k: v for k, v in keys.items() if k not in _OURS}, "port": ctx.port()}
    for _ in range(ctx.reps(5, 2)):
        _unload(client)
        direct.append(_direct_cold(ctx, floor_keys))
        start = time.perf_counter()
        mine.append((_first_byte(gw_port, {**ONE_TOKEN, "model": "cold", "stream": True}) - start)
                    * 1000)  # fmt: skip
    _unload(client)
    before = len(daemon.events("instance.state_changed", instance="cold", to="starting"))
    base = f"http://127.0.0.1:{gw_port}"
    replies = asyncio.run(_concurrent(base, "cold", 20, 1))
    started = len(daemon.events("instance.state_changed", instance="cold", to="starting")) - before
    return [
        Result(
            "gateway cold TTFB", 1, "ms", mine, direct, "overhead", "overhead", 100.0,
            "<= direct +100 ms", "floor: launch llama-server, poll /health at 5 ms, request",
        ),
        Result(
            "gateway 20 cold requests", 20, "req", [float(started)], [1.0], "overhead", "max",
            1.0, "1 start, all served", also_ok=all(replies),
        ),
    ]  # fmt: skip


_OURS = ("on_demand", "idle_timeout")


def _unload(client: Client) -> None:
    client.call("POST", "/v1/instances/cold/stop")
    wait_for(
        lambda: client.call("GET", "/v1/instances/cold")["state"] == "stopped" or None,
        30.0,
        "cold stopped",
    )
