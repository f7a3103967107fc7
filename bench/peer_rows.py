"""One request at a time through each target, interleaved: added latency, CPU per request,
SSE time, and a cold request's time to first byte.

Every figure has its floor in the same run: the same request sent to the same
llama-server directly, in the same round (the order rotates each round, so no target
always follows another). Latency is taken in rounds of three, each peer with direct and
llamad (see `latency`).
"""

from __future__ import annotations

import http.client

from bench.common import Context, Result
from bench.gateway import ONE_TOKEN, _first_byte, _p, _post
from bench.gateway_sse import stream
from bench.targets import Target

WARMUP = 20


def _connect(target: Target, model: str) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", target.port(model), timeout=60)


def latency(ctx: Context, direct: Target, peers: list[Target], model: str) -> list[Result]:
    """p50 and p99 of each peer's added latency (1-token completion, kept-alive), each
    peer in rounds of its own with direct and llamad (`peers[0]`). In one rotation of
    every target, each request would follow the others': a proxy that spends 10 ms of
    Python on a request leaves the caches of a 2-core machine cold for the requests after
    it, so every other figure would carry LiteLLM's. llamad's own rows are from its
    rounds beside nginx, the judged pair (else beside the first peer, or direct alone).
    A peer with a floor of its own (a --baseline llamad) has it in its rounds too."""
    llamad, others = peers[0], peers[1:]
    groups = [[direct, llamad, *p.own_floors(), p] for p in others] or [[direct, llamad]]
    judged = next((g for g in groups if g[-1].name == "nginx"), groups[0])
    rows = []
    for group in groups:
        took = _rounds(ctx, group, model)
        with_llamad = {q: _p(took[llamad.name], q) - _p(took[direct.name], q) for q in (50, 99)}
        for t in ([llamad] if group is judged else []) + group[2:][-1:]:
            floor = took[t.against(direct).name]
            for q in (50, 99):
                rows.append(
                    Result(
                        f"peers: {t.name} added latency p{q}", len(floor), "ms",
                        [_p(took[t.name], q)], [_p(floor, q)], "overhead", "none", None, "-",
                        f"in rounds of {', '.join(g.name for g in group)}; llamad in them: "
                        f"{with_llamad[q]:+.2f} ms",
                    )
                )  # fmt: skip
    return rows


def _rounds(ctx: Context, targets: list[Target], model: str) -> dict[str, list[float]]:
    """Each target's milliseconds per request, one request each a round, the order turned
    each round so that no target always follows the same one."""
    conns = {t.name: _connect(t, model) for t in targets}
    took: dict[str, list[float]] = {t.name: [] for t in targets}
    body = {**ONE_TOKEN, "model": model}
    for i in range(ctx.reps(400, 100) + WARMUP):
        k = i % len(targets)
        for t in targets[k:] + targets[:k]:
            ms = _post(conns[t.name], "/v1/completions", body)
            if i >= WARMUP:
                took[t.name].append(ms)
    for conn in conns.values():
        conn.close()
    return took


def cpu_per_request(ctx: Context, peers: list[Target], model: str) -> dict[str, float]:
    """Microseconds of each proxy's own CPU per 1-token completion, sent one at a time."""
    body = {**ONE_TOKEN, "model": model}
    n = ctx.reps(300, 150)
    cpu = {}
    for t in peers:
        conn = _connect(t, model)
        for _ in range(WARMUP):
            _post(conn, "/v1/completions", body)
        before = t.cpu(model)
        for _ in range(n):
            _post(conn, "/v1/completions", body)
        cpu[t.name] = (t.cpu(model) - before) / n * 1e6
        conn.close()
    return cpu


def sse(ctx: Context, direct: Target, peers: list[Target], model: str) -> list[Result]:
    """Each peer's SSE time against a direct stream (its own floor's) just before it, in
    rounds."""
    body = {"prompt": "hi", "max_tokens": 30, "stream": True, "ignore_eos": True, "model": model}
    mine: dict[str, list[float]] = {t.name: [] for t in peers}
    floor: dict[str, list[float]] = {t.name: [] for t in peers}
    for i in range(ctx.reps(21, 5) + 1):
        k = i % len(peers)
        for t in peers[k:] + peers[:k]:
            a = stream(t.against(direct).port(model), body).flowing * 1000
            b = stream(t.port(model), body).flowing * 1000
            if i:  # the first round warms connections and caches
                floor[t.name].append(a)
                mine[t.name].append(b)
    return [
        Result(
            f"peers: {t.name} SSE time, paced model", len(mine[t.name]), "ms", mine[t.name],
            floor[t.name], "ratio", "none", None, "-", paired=True,
        )
        for t in peers
    ]  # fmt: skip


def first_byte(port: int, model: str) -> float:
    """perf_counter() at the first byte of a streamed 1-token completion."""
    return _first_byte(port, {**ONE_TOKEN, "model": model, "stream": True})
