"""SSE throughput through the gateway against the same stream read directly.

Throughput is the stream's pace once it flows: the time from the first body byte to
`[DONE]` (the time to the first byte is the latency rows' business). Each row alternates a
direct stream and one through the gateway, on the same llama-server.

The judged row streams from a generated 43M-parameter model (`PACED`) that makes a token
every 5 to 6 ms on one thread, as fast as a 1B model on a Mac's GPU, with one generation
thread so a core stays free for the gateway, as a GPU machine's CPU is. The other rows are
for information: the same model on every core (CPU inference, nothing to spare), and the
tiny model, whose token every 0.15 ms makes the gateway's per-chunk cost (a socket read
and a socket write each, since nothing is buffered) show as much as it ever can. The
client reads with `http.client`'s `read1`, so the measuring side costs little per chunk.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import NamedTuple

import psutil

from bench.common import Context, Result, instance_keys
from llamad.daemon.tinymodel import Shape, write_tiny_model

PACED = Shape(n_embd=768, n_head=12, n_layer=6, n_ff=2048, f16=True)


class Stream(NamedTuple):
    """One SSE completion read to its end."""

    flowing: float  # seconds from the first body byte to the end
    chunks: int  # `data:` events


class Case(NamedTuple):
    instance: str
    label: str
    tokens: int
    pairs: tuple[int, int]  # full, --quick
    judged: bool


CASES = (
    Case("paced-lean", "paced model, one generation thread", 30, (41, 9), True),
    Case("paced", "paced model on every core", 30, (41, 9), False),
    Case("tiny-lean", "tiny model, one generation thread", 200, (25, 5), False),
    Case("hot", "tiny model on every core", 200, (25, 5), False),
)


def sse_instances(ctx: Context) -> dict[str, dict[str, object]]:
    """The instances the SSE rows stream from besides the tiny `hot` one (the latency
    rows use `tiny-lean` too)."""
    paced = write_tiny_model(ctx.root / "paced.gguf", shape=PACED)
    return {
        "paced-lean": {**instance_keys(ctx, ctx.port(), 1024), "model": paced, "threads": 1},
        "paced": {**instance_keys(ctx, ctx.port(), 1024), "model": paced},
        "tiny-lean": {**instance_keys(ctx, ctx.port(), 1024), "threads": 1},
    }


def stream(port: int, body: dict[str, object]) -> Stream:
    """One SSE completion, read to its `[DONE]`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        first, chunks, tail = 0.0, 0, b""
        while chunk := response.read1(65536):
            first = first or time.perf_counter()
            chunks += chunk.count(b"data: ")
            tail = (tail + chunk)[-64:]
        took = time.perf_counter() - first
    finally:
        conn.close()
    if b"[DONE]" not in tail:
        raise RuntimeError("a stream ended without [DONE]")
    return Stream(took, chunks)


def sse_rows(ctx: Context, daemon_pid: int, gateway: int, ports: dict[str, int]) -> list[Result]:
    """One row per case, then the daemon's CPU per relayed chunk of the tiny model's."""
    daemon = psutil.Process(daemon_pid)
    rows, cpu, chunks = [], 0.0, 0
    for case in CASES:
        body = {"prompt": "hi", "max_tokens": case.tokens, "stream": True, "ignore_eos": True}
        mine, direct = [], []
        for i in range(ctx.reps(*case.pairs) + 1):
            floor = stream(ports[case.instance], body)
            before = sum(daemon.cpu_times()[:2])
            ours = stream(gateway, {**body, "model": case.instance})
            if case.instance == "tiny-lean":
                cpu += sum(daemon.cpu_times()[:2]) - before
                chunks += ours.chunks
            if i:  # the first pair warms connections and caches
                direct.append(floor.flowing * 1000)
                mine.append(ours.flowing * 1000)
        rows.append(
            Result(
                f"gateway SSE time, {case.label}", len(mine), "ms", mine, direct, "ratio",
                # Time per stream: a ratio <= 1/0.98 is throughput >= 0.98x direct.
                "ratio" if case.judged else "none", 1 / 0.98,
                ">= 0.98x throughput" if case.judged else "-",
                f"{case.tokens} tokens, first byte to [DONE]; floor: the same stream direct; "
                "ratio: the median pair's", paired=True,
            )
        )  # fmt: skip
    rows.append(
        Result(
            "gateway CPU per SSE chunk", chunks, "us", [cpu / chunks * 1e6], [0.0],
            "overhead", "none", None, "-",
            "the daemon's user+system CPU per relayed chunk, tiny model",
        )
    )  # fmt: skip
    return rows
