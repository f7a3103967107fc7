"""Which HTTP client the gateway relays with: the same 1-token completion, sent to one
llama-server by each candidate from this process, one request at a time.

The gateway's added latency is mostly the CPU its event loop spends per request, so each
candidate is judged by its CPU time per request (this process only; llama-server runs
apart) as well as by its latency. The floor is the standard library's blocking
`http.client`, the least a Python client can do. Candidates: httpx's transport (what
llamad speaks elsewhere), aiohttp (the relay's client before its own pool) and the relay's
pool (`llamad.upstream.pool`), each on asyncio's own event loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from itertools import product

import aiohttp
import httpx
import uvloop

from bench.common import Context, Result, instance_keys, wait_for
from bench.gateway import ONE_TOKEN, _healthy
from bench.procs import floor_specs, launch_direct, stop_direct
from llamad.upstream.pool import Pool

WARMUP = 20
Send = Callable[[], Awaitable[None]]
BODY = json.dumps(ONE_TOKEN).encode()
HEADERS = {"content-type": "application/json"}


async def _timed(send: Send, n: int) -> tuple[list[float], float]:
    took: list[float] = []
    cpu0 = 0.0
    for i in range(n + WARMUP):
        if i == WARMUP:
            cpu0 = time.process_time()
        start = time.perf_counter()
        await send()
        took.append((time.perf_counter() - start) * 1000)
    return took[WARMUP:], (time.process_time() - cpu0) / n


async def _stdlib(port: int, n: int) -> tuple[list[float], float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    async def send() -> None:
        # Blocking on purpose: the floor has no client machinery to speak of.
        conn.request("POST", "/v1/completions", BODY, HEADERS)
        conn.getresponse().read()

    try:
        return await _timed(send, n)
    finally:
        conn.close()


async def _httpx(port: int, n: int) -> tuple[list[float], float]:
    # The transport alone, as the relay used it: no client-side cookie or redirect work.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    async with httpx.AsyncHTTPTransport(verify=False, limits=limits) as transport:
        url = f"http://127.0.0.1:{port}/v1/completions"

        async def send() -> None:
            request = httpx.Request("POST", url, headers=HEADERS, content=BODY)
            response = await transport.handle_async_request(request)
            await response.aread()
            await response.aclose()

        return await _timed(send, n)


async def _aiohttp(port: int, n: int) -> tuple[list[float], float]:
    # As the relay had it: no cookie jar, no headers of its own, no decompression.
    connector = aiohttp.TCPConnector(limit=0, ssl=False, keepalive_timeout=4.0)
    skip = ("User-Agent", "Accept", "Accept-Encoding")
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=skip,
    ) as session:  # fmt: skip
        url = f"http://127.0.0.1:{port}/v1/completions"

        async def send() -> None:
            async with session.post(url, headers=HEADERS, data=BODY) as response:
                await response.read()

        return await _timed(send, n)


async def _pool(port: int, n: int) -> tuple[list[float], float]:
    pool = Pool()
    headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def send() -> None:
        answer = await pool.request(
            "POST", f"http://127.0.0.1:{port}", "/v1/completions", headers, BODY
        )
        async for _ in answer.chunks():
            pass
        answer.close()

    try:
        return await _timed(send, n)
    finally:
        await pool.close()


Timings = tuple[list[float], float]  # per-request ms, CPU seconds per request
CANDIDATES: dict[str, Callable[[int, int], Coroutine[None, None, Timings]]] = {
    "httpx": _httpx,
    "aiohttp": _aiohttp,
    "llamad pool": _pool,
}


def run(ctx: Context) -> list[Result]:
    """Each candidate on each loop against one directly launched llama-server."""
    port = ctx.port()
    spec = floor_specs(ctx, {"x": {**instance_keys(ctx, port), "ctx_size": 1024}})[0]
    proc = launch_direct(ctx, spec, ctx.root / "machinery.log")
    results: list[Result] = []
    try:
        wait_for(lambda: _healthy(port), 30.0, "llama-server ready")
        n = ctx.reps(400, 100)
        floor, floor_cpu = asyncio.run(_stdlib(port, n))
        loops = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
        for (loop_name, factory), (name, candidate) in product(loops.items(), CANDIDATES.items()):
            with asyncio.Runner(loop_factory=factory) as runner:
                took, cpu = runner.run(candidate(port, n))
            label = f"relay client {name} on {loop_name}"
            note = "1-token completion, sequential, keep-alive; floor: blocking http.client"
            results.append(Result(label, n, "ms", took, floor, "overhead", "none", None, "-", note))
            results.append(
                Result(
                    f"{label}: CPU/req", n, "us", [cpu * 1e6], [floor_cpu * 1e6],
                    "ratio", "none", None, "-", "this process's CPU time per request",
                )
            )  # fmt: skip
    finally:
        stop_direct([proc])
    return results
