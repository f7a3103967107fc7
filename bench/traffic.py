"""Clients that send requests to the gateway for a bounded time and count what went wrong.

Shared by the stress tests (tests/gateway/test_stress.py) and `make bench` (bench/stress.py),
so both judge an answer by the same rules:
- a plain answer is 200 with a JSON body;
- an OpenAI stream (SSE) ends with `data: [DONE]` and carries no error event;
- an Ollama stream (NDJSON) ends with a `"done": true` object and carries no `error`;
- a stream the client leaves on purpose (`cut_after`) is neither a success nor a failure.

A failure is counted by kind ("HTTP 502", "truncated", "error event", "timeout", ...);
the caller says which failures its rules allow (a removed model's 404, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

Shape = Literal["json", "sse", "ndjson"]
OK, CUT = "ok", "cut"
TRUNCATED, ERROR_EVENT, TIMEOUT = "truncated", "error event", "timeout"
EXAMPLES = 5  # failures described in full, for the report


@dataclass(frozen=True)
class Ask:
    """One request: its path and body, the model it names, and how to read the answer."""

    path: str
    body: dict[str, Any]
    model: str
    shape: Shape
    cut_after: int | None = None  # leave a stream after this many lines (a client that goes)


def openai_chat(
    model: str, tokens: int = 4, stream: bool = False, cut_after: int | None = None
) -> Ask:
    """A short `/v1/chat/completions`, streamed as SSE or answered whole."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": tokens,
        "stream": stream,
    }
    return Ask("/v1/chat/completions", body, model, "sse" if stream else "json", cut_after)


def ollama_generate(
    model: str,
    prompt: str = "hi",
    tokens: int = 4,
    stream: bool = True,
    cut_after: int | None = None,
    **extra: Any,
) -> Ask:
    """An Ollama `/api/generate` (`extra` such as keep_alive goes into the body)."""
    body: dict[str, Any] = {"model": model, "prompt": prompt, "stream": stream, **extra}
    if prompt:
        body["options"] = {"num_predict": tokens}
    return Ask("/api/generate", body, model, "ndjson" if stream else "json", cut_after)


def openai_long(model: str, tokens: int, logprobs: int = 0) -> Ask:
    """A streamed `/v1/completions` that writes `tokens` tokens whatever the model says;
    `logprobs` makes each token's event large (the vocabulary's probabilities)."""
    body: dict[str, Any] = {"model": model, "prompt": "hi", "max_tokens": tokens}
    body |= {"stream": True, "ignore_eos": True}
    if logprobs:
        body["logprobs"] = logprobs
    return Ask("/v1/completions", body, model, "sse")


class Judge:
    """Reads a stream's lines as they come and says how it ended."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.lines = 0
        self.verdict: str | None = None  # OK or a failure, once the stream has said
        self.last = ""

    def feed(self, line: str) -> None:
        """One line of the stream (empty lines, SSE's separators, are skipped)."""
        if not line or self.verdict is not None:
            return
        self.lines += 1
        self.last = line
        if self.shape == "sse":
            self._sse(line)
        else:
            self._ndjson(line)

    def _sse(self, line: str) -> None:
        if line == "event: error":
            self.verdict = ERROR_EVENT
        elif line == "data: [DONE]":
            self.verdict = OK
        elif line.startswith("data: ") and '"error"' in line and _has_error(line[6:]):
            self.verdict = ERROR_EVENT

    def _ndjson(self, line: str) -> None:
        try:
            obj = json.loads(line)
        except ValueError:
            self.verdict = "bad line"
            return
        if "error" in obj:
            self.verdict = ERROR_EVENT
        elif obj.get("done") is True:
            self.verdict = OK

    def finish(self) -> str:
        """The outcome once the stream has ended: without its last word, it was cut short."""
        return self.verdict or TRUNCATED


def _has_error(data: str) -> bool:
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and "error" in obj


def judge_whole(status: int, body: bytes) -> str:
    """The outcome of an answer read whole."""
    if status != 200:
        return f"HTTP {status}"
    try:
        obj = json.loads(body)
    except ValueError:
        return "bad body"
    return ERROR_EVENT if isinstance(obj, dict) and "error" in obj else OK


Allow = Callable[[Ask, str], bool]


def nothing_allowed(ask: Ask, outcome: str) -> bool:
    """The default rule: every failure counts."""
    return False


@dataclass
class Tally:
    """What a run of clients saw: requests sent, answered, left, failed and allowed."""

    sent: int = 0
    ok: int = 0
    cut: int = 0  # streams the client left on purpose
    failed: Counter[str] = field(default_factory=Counter)  # by kind: the rules say no
    allowed: Counter[str] = field(default_factory=Counter)  # by kind: the rules say yes
    examples: list[str] = field(default_factory=list)

    def add(self, ask: Ask, outcome: str, detail: str, allow: Allow) -> None:
        """Count one finished request."""
        self.sent += 1
        if outcome == OK:
            self.ok += 1
        elif outcome == CUT:
            self.cut += 1
        elif allow(ask, outcome):
            self.allowed[outcome] += 1
        else:
            self.failed[outcome] += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(f"{ask.path} {ask.model}: {outcome} {detail[:200]}")

    def merge(self, other: Tally) -> Tally:
        """Both tallies' counts in one."""
        return Tally(
            self.sent + other.sent,
            self.ok + other.ok,
            self.cut + other.cut,
            self.failed + other.failed,
            self.allowed + other.allowed,
            (self.examples + other.examples)[:EXAMPLES],
        )

    @property
    def n_failed(self) -> int:
        return sum(self.failed.values())

    @property
    def n_allowed(self) -> int:
        return sum(self.allowed.values())

    def __str__(self) -> str:
        return (
            f"sent {self.sent}, ok {self.ok}, cut {self.cut}, "
            f"failed {self.n_failed} {dict(self.failed)}, allowed {self.n_allowed} "
            f"{dict(self.allowed)}; first failures: {self.examples}"
        )


async def send(client: httpx.AsyncClient, ask: Ask, timeout: float) -> tuple[str, str]:
    """Send one request and read its answer: (outcome, detail for a failure)."""
    try:
        async with asyncio.timeout(timeout):
            return await _exchange(client, ask)
    except TimeoutError:
        return TIMEOUT, f"no end within {timeout:g}s"


async def _exchange(client: httpx.AsyncClient, ask: Ask) -> tuple[str, str]:
    judge, began = Judge(ask.shape), False
    try:
        async with client.stream("POST", ask.path, json=ask.body) as resp:
            began = True
            if ask.shape == "json" or resp.status_code != 200:
                body = await resp.aread()
                return judge_whole(resp.status_code, body), body.decode(errors="replace")
            if ask.cut_after == 0:
                return CUT, ""  # gone as soon as the answer began
            async for line in resp.aiter_lines():
                judge.feed(line)
                if ask.cut_after is not None and judge.lines >= ask.cut_after:
                    if judge.verdict is None:
                        return CUT, ""  # leaving the block closes the connection
                    break
    except httpx.TransportError as exc:
        # Before the answer began, the gateway refused or dropped the request; after, the
        # stream (or a whole answer's body) was cut short.
        kind = TRUNCATED if began else f"transport {type(exc).__name__}"
        return kind, repr(exc)
    return judge.finish(), judge.last


class Traffic:
    """`clients` loops, each sending `pick(rng)` back to back, on a thread of their own,
    until `seconds` have passed, `requests` were sent in all, or stop() is called.

    Every request is bounded by `timeout`, so join() returns soon after the end."""

    def __init__(
        self,
        base: str,
        pick: Callable[[random.Random], Ask],
        *,
        clients: int = 2,
        seconds: float = 6.0,
        requests: int | None = None,
        allow: Allow = nothing_allowed,
        timeout: float = 30.0,
        seed: int = 22,
    ) -> None:
        self.base, self.pick, self.clients = base, pick, clients
        self.seconds, self.requests, self.allow = seconds, requests, allow
        self.timeout, self.seed = timeout, seed
        self.tally = Tally()
        self._stop = threading.Event()
        self._began = 0  # requests handed out so far
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> Traffic:
        """Start the clients; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Send no more requests; those under way finish."""
        self._stop.set()

    def join(self) -> Tally:
        """Wait for the clients to end (at most one request's timeout after the end)."""
        self._thread.join(self.seconds + self.timeout + 10)
        if self._thread.is_alive():
            raise RuntimeError("the traffic clients did not end")
        if self._error is not None:
            raise RuntimeError("the traffic clients crashed") from self._error
        return self.tally

    def __enter__(self) -> Traffic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._thread.join(self.timeout + 10)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # handed to join(): a thread's error is lost otherwise
            self._error = exc

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=self.clients, max_keepalive_connections=0)
        # No keep-alive: each request opens its own connection, so a cut stream's
        # connection is never a question for the next request.
        async with httpx.AsyncClient(
            base_url=self.base, timeout=self.timeout, limits=limits, trust_env=False
        ) as client:
            end = time.monotonic() + self.seconds
            await asyncio.gather(*(self._client(client, i, end) for i in range(self.clients)))

    async def _client(self, client: httpx.AsyncClient, index: int, end: float) -> None:
        rng = random.Random(self.seed * 1000 + index)
        while not self._stop.is_set() and time.monotonic() < end:
            if self.requests is not None and self._began >= self.requests:
                return
            self._began += 1
            ask = self.pick(rng)
            outcome, detail = await send(client, ask, self.timeout)
            self.tally.add(ask, outcome, detail, self.allow)


def run(base: str, pick: Callable[[random.Random], Ask], **kw: Any) -> Tally:
    """Run `Traffic(base, pick, **kw)` to its end."""
    return Traffic(base, pick, **kw).start().join()


def until(cond: Callable[[], bool], timeout: float) -> bool:
    """Whether `cond` came true within `timeout` seconds, polled every 20 ms."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def leave_when(base: str, ask: Ask, cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Send `ask` and hang up once `cond()` holds (the gateway queued it, say), as a client
    that gives up does; whether `cond()` held within `timeout` seconds."""
    async with httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client:
        call = asyncio.ensure_future(client.post(ask.path, json=ask.body))
        held = await asyncio.to_thread(until, cond, timeout)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    return held


# A client that reads a stream's first line, then nothing until told: with its receive
# buffer fixed small, the gateway cannot finish relaying a large answer (a token with
# its logprobs is ~16 KB of SSE), so the request stays in flight as long as the caller
# wants, however fast the machine generates.
_SMALL_RCVBUF = [(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)]


class Held(threading.Thread):
    """One stream, held in flight after its first line until go() (see `_SMALL_RCVBUF`)."""

    def __init__(self, base: str, ask: Ask, timeout: float = 90.0) -> None:
        super().__init__(name="held-stream", daemon=True)
        self.base, self.ask, self.timeout = base, ask, timeout
        self.first = threading.Event()
        self._go = threading.Event()
        self.outcome: str | None = None
        self.detail = ""

    def go(self) -> None:
        """Read the rest of the stream."""
        self._go.set()

    def run(self) -> None:
        judge = Judge(self.ask.shape)
        transport = httpx.HTTPTransport(socket_options=_SMALL_RCVBUF)
        try:
            with (
                httpx.Client(transport=transport, timeout=self.timeout, trust_env=False) as c,
                c.stream("POST", self.base + self.ask.path, json=self.ask.body) as resp,
            ):
                if resp.status_code != 200:
                    self.outcome = f"HTTP {resp.status_code}"
                    return
                for line in _held(resp.iter_lines(), self.first, self._go, self.timeout):
                    judge.feed(line)
            self.outcome, self.detail = judge.finish(), judge.last
        except httpx.HTTPError as exc:
            self.outcome, self.detail = TRUNCATED, repr(exc)
        finally:
            self.first.set()  # a request that failed at once must not keep the caller waiting


def _held(
    lines: Iterator[str], first: threading.Event, go: threading.Event, wait: float
) -> Iterator[str]:
    for line in lines:
        yield line
        first.set()
        if not go.wait(wait):
            return
