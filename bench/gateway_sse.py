"""SSE throughput through the gateway against the same stream read directly.

The tiny model streams a token about every 0.15 ms on a 2-core CPU, a worst case for any
proxy: the gateway relays each token as its own chunk (nothing is buffered), so its
per-chunk work competes with generation for the same cores. The row judged against the
target streams from an instance with one generation thread, which leaves a core free for
the gateway as a GPU machine's CPU is; the row with llama-server on every core is shown
for information. The client reads with `http.client`'s `read1`, so the measuring side
costs little per chunk (httpx's iterator cost more per chunk than the gateway did).
"""

from __future__ import annotations

import http.client
import json
import time

from bench.common import Context, Result

BODY = {"prompt": "hi", "max_tokens": 200, "stream": True, "ignore_eos": True}


def stream_seconds(port: int, body: dict[str, object]) -> float:
    """Seconds for one SSE completion read to its `[DONE]`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        start, tail = time.perf_counter(), b""
        conn.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        while chunk := response.read1(65536):
            tail = (tail + chunk)[-64:]
        took = time.perf_counter() - start
    finally:
        conn.close()
    if b"[DONE]" not in tail:
        raise RuntimeError("a stream ended without [DONE]")
    return took


def sse_rows(
    ctx: Context, gateway: int, lean: tuple[str, int], busy: tuple[str, int]
) -> list[Result]:
    """Interleaved direct and gateway streams from the `lean` (one thread) and `busy`
    (every core) instances."""
    rows = []
    for (name, port), judged in ((lean, True), (busy, False)):
        mine, direct = [], []
        for _ in range(ctx.reps(25, 5)):
            direct.append(stream_seconds(port, BODY))
            mine.append(stream_seconds(gateway, {**BODY, "model": name}))
        label = "one generation thread" if judged else "llama-server on every core"
        rows.append(
            Result(
                f"gateway SSE time, {label}", len(mine), "s", mine, direct, "ratio",
                # Time per stream: a ratio <= 1/0.98 is throughput >= 0.98x direct.
                "ratio" if judged else "none", 1 / 0.98, ">= 0.98x throughput" if judged else "-",
                "200 tokens, one chunk each; floor: the same stream direct",
            )
        )  # fmt: skip
    return rows
