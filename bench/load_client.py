"""Many clients at once, in a process of their own: `python -m bench.load_client SPEC`.

The peer benchmarks run the client load here, apart from the bench's process, so that
the clients' CPU is never counted against the proxy measured (the proxy's CPU is read
from its own processes). SPEC is JSON: url, model, clients, requests, tokens, stream.
`clients` loops send `requests` completions in all (at most `seconds` long, when
given); the answer is one JSON line on stdout: the wall time from the first request
to the last answer, how many succeeded, the errors by kind, each stream's time to first
token (ms) and the tokens received.

A stream succeeds when it answers 200 and ends with `data: [DONE]`; a whole answer, when
it answers 200 with a body. A token is a `data:` event carrying non-empty `text`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
import uvloop

TIMEOUT_S = 300.0


@dataclass
class Outcome:
    """What the clients saw."""

    wall_s: float = 0.0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    ttft_ms: list[float] = field(default_factory=list)
    tokens: int = 0


def _tokens(line: bytes) -> int:
    """1 for an SSE event with text in it (llama-server and every peer write `"text":`)."""
    return int(line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line)


async def _one(session: aiohttp.ClientSession, spec: dict[str, Any], out: Outcome) -> None:
    body = {"model": spec["model"], "prompt": "hi", "max_tokens": spec["tokens"]}
    body |= {"stream": spec["stream"], "ignore_eos": True, "temperature": 0}
    start = time.perf_counter()
    try:
        async with session.post(spec["url"] + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                await resp.read()
                out.errors[f"HTTP {resp.status}"] += 1
                return
            if not spec["stream"]:
                await resp.read()
                out.ok += 1
                return
            first, done, tokens = 0.0, False, 0
            async for line in resp.content:
                got = _tokens(line)
                if got and not first:
                    first = time.perf_counter()
                tokens += got
                done = done or line.startswith(b"data: [DONE]")
            out.tokens += tokens
            if not done:
                out.errors["truncated"] += 1
                return
            out.ok += 1
            out.ttft_ms.append((first - start) * 1000 if first else float("nan"))
    except (aiohttp.ClientError, TimeoutError) as exc:
        out.errors[type(exc).__name__] += 1


async def run(spec: dict[str, Any]) -> Outcome:
    """Send spec["requests"] completions from spec["clients"] concurrent loops."""
    out = Outcome()
    left = int(spec["requests"])
    # llama-server closes its connection after every stream, so a stream takes a new one
    # (as the stress clients do); whole answers keep theirs alive.
    connector = aiohttp.TCPConnector(limit=0, force_close=bool(spec["stream"]))
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        end = time.monotonic() + float(spec.get("seconds") or "inf")

        async def client() -> None:
            nonlocal left
            while left > 0 and time.monotonic() < end:
                left -= 1
                await _one(session, spec, out)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(int(spec["clients"]))))
        out.wall_s = time.perf_counter() - start
    return out


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    out = uvloop.run(run(spec))
    print(json.dumps({**asdict(out), "errors": dict(out.errors)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
