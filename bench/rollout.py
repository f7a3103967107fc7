"""A rolling update of two pods under 8 clients, as Kubernetes plays it, on loopback.

Pod A (a llamad with its gateway) serves the clients through a front that stands in for
kube-proxy: each new connection goes to the next pod whose readiness probe (`/ready`,
every 100 ms) last passed, and stays with that pod. Pod B starts; once the front sees it
ready, A gets SIGTERM, as the Deployment controller sends it. The row: how long the
update took (B launched to A exited) and each request's outcome; none may be lost. A
streamed request in flight on A when the signal comes must end whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.common import Context, Result, http_get, instance_keys, wait_for
from bench.procs import Daemon

CLIENTS = 8
PROBE_PERIOD_S = 0.1  # the kubelet's readinessProbe periodSeconds, scaled down
# The drain's delay: a few probe periods, so the front has let go before A stops listening.
SHUTDOWN_DELAY_S = 2.0
# The manifests' grace: a stream of LONG_TOKENS on a 2-core machine, beside pod B serving
# the eight clients flat out, ran past 20 s and was cut.
SHUTDOWN_GRACE_S = 60.0
# A streamed answer long enough to be in flight through the whole delay.
LONG_TOKENS = 600


class Front:
    """kube-proxy in front of a Service: a new connection goes to the next ready pod
    (round robin), and stays with it; a pod whose probe fails takes no new one. Its own
    event loop runs in a thread."""

    def __init__(self, port: int, pods: list[int]) -> None:
        self.port, self.pods = port, pods
        self.ready = dict.fromkeys(pods, False)
        self.probes: dict[int, list[tuple[float, int | None]]] = {p: [] for p in pods}
        self.connections: Counter[int] = Counter()
        self.unrouted = 0  # connections that found no ready pod, or a pod refusing
        self._turn = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._quit: asyncio.Event | None = None
        self._bound = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main()), name="front", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        if not self._bound.wait(10):
            raise TimeoutError("the front never listened")

    def close(self) -> None:
        if self._loop is not None and self._quit is not None:
            self._loop.call_soon_threadsafe(self._quit.set)
        if self._thread.is_alive():
            self._thread.join(10)

    def saw(self, pod: int, status: int) -> bool:
        """The front's probe has seen `pod` answer `status`."""
        return any(s == status for _, s in list(self.probes[pod]))

    async def _main(self) -> None:
        self._loop, self._quit = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._connected, "127.0.0.1", self.port)
        try:
            async with asyncio.TaskGroup() as group:
                for pod in self.pods:
                    group.create_task(self._probe(pod))
                self._bound.set()
                await self._quit.wait()
        finally:
            # Connections still piped end with the loop (asyncio.run cancels them).
            server.close()

    async def _probe(self, pod: int) -> None:
        assert self._quit is not None
        while not self._quit.is_set():
            got = await asyncio.to_thread(http_get, pod, "/ready", 0.5)
            status = got[0] if got else None
            self.probes[pod].append((time.monotonic(), status))
            self.ready[pod] = status == 200
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quit.wait(), PROBE_PERIOD_S)

    def _pick(self) -> int | None:
        ready = [p for p in self.pods if self.ready[p]]
        if not ready:
            return None
        self._turn += 1
        return ready[self._turn % len(ready)]

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pod = self._pick()
        try:
            if pod is None:
                raise ConnectionRefusedError("no ready pod")
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", pod)
        except OSError:
            self.unrouted += 1
            writer.close()
            return
        self.connections[pod] += 1
        async with asyncio.TaskGroup() as pipes:
            pipes.create_task(_pipe(reader, up_writer))
            pipes.create_task(_pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Bytes one way until the sender closes, then its half-close passed on."""
    with contextlib.suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()


@dataclass
class Outcome:
    """One client request: when it began (seconds into the play), how long it took, and
    its status, or the error that lost it."""

    began: float
    ms: float
    status: int | None
    error: str = ""

    @property
    def lost(self) -> bool:
        return self.status != 200


@dataclass
class Clients:
    """`CLIENTS` threads, each with its own kept-alive connection pool, asking for short
    chats through the front back to back."""

    url: str
    t0: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for i in range(CLIENTS):
            thread = threading.Thread(target=self._loop, name=f"client-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def ok(self) -> int:
        return sum(not o.lost for o in list(self.outcomes))

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(60)

    def _loop(self) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        with httpx.Client(base_url=self.url, timeout=60) as client:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    status, error = client.post("/v1/chat/completions", json=body).status_code, ""
                except httpx.HTTPError as exc:
                    status, error = None, f"{type(exc).__name__}: {exc}"
                ms = (time.monotonic() - began) * 1000
                self.outcomes.append(Outcome(began - self.t0, ms, status, error))


def long_stream(port: int, started: threading.Event, result: dict[str, Any]) -> None:
    """A streamed chat straight to pod A, long enough to span the drain's delay."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": LONG_TOKENS,
        "stream": True,
        "ignore_eos": True,
    }
    chunks = 0
    try:
        with httpx.stream(
            "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60
        ) as resp:
            result["status"] = resp.status_code
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    chunks += 1
                    started.set()
                elif line == "data: [DONE]":
                    result["done"] = True
    except httpx.HTTPError as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        result["chunks"] = chunks
        started.set()


def pod(ctx: Context, name: str, gateway: int, instance: int) -> Daemon:
    keys = {**instance_keys(ctx, instance, 1024), "n_parallel": 4, "context_shift": True}
    return Daemon(
        ctx,
        name,
        {"m": keys},
        supervise={"health_interval": 0.5},
        gateway={
            "listen": f"127.0.0.1:{gateway}",
            "shutdown_delay": SHUTDOWN_DELAY_S,
            "shutdown_grace": SHUTDOWN_GRACE_S,
            # Clients name the front (a Service's name, in a cluster), not the pod.
            "allowed_hosts": ["127.0.0.1"],
        },
    )


def ready(port: int) -> bool:
    got = http_get(port, "/ready")
    return got is not None and got[0] == 200


@dataclass
class Play:
    """What one rolling update showed."""

    outcomes: list[Outcome]
    update_s: float  # pod B launched until pod A exited
    old_exit: int | None
    front: Front
    long: dict[str, Any]
    old_events: dict[str, list[dict[str, Any]]]


def play(ctx: Context, before: int, after: int) -> Play:
    """Roll pod A over to pod B under the clients' load: `before` answers on A first,
    `after` more once A is gone."""
    ga, gb = ctx.port(), ctx.port()
    front = Front(ctx.port(), [ga, gb])
    clients = Clients(f"http://127.0.0.1:{front.port}")
    long: dict[str, Any] = {}
    with contextlib.ExitStack() as undo:  # each callback runs, whatever one raises
        a = pod(ctx, "pod-a", ga, ctx.port())
        undo.callback(a.stop)
        a.wait_running(["m"])
        wait_for(lambda: ready(ga), 30, "pod A ready")
        front.start()
        undo.callback(front.close)
        wait_for(lambda: front.ready[ga], 10, "the front sees pod A")
        clients.start()
        undo.callback(clients.stop)
        wait_for(lambda: clients.ok() >= before, 120, f"{before} answers from pod A")
        launched = time.monotonic()
        b = pod(ctx, "pod-b", gb, ctx.port())
        undo.callback(b.stop)
        wait_for(lambda: front.ready[gb], 60, "the front sees pod B ready")
        # A request in flight on A when SIGTERM comes, and outlasting the delay.
        started = threading.Event()
        streamer = threading.Thread(target=long_stream, args=(ga, started, long), daemon=True)
        streamer.start()
        if not started.wait(30):
            raise TimeoutError("the long stream never began")
        a.proc.terminate()
        code = a.proc.wait(SHUTDOWN_DELAY_S + SHUTDOWN_GRACE_S + 30)
        update_s = time.monotonic() - launched
        streamer.join(30)
        served = clients.ok()
        wait_for(lambda: clients.ok() >= served + after, 120, f"{after} answers from pod B")
        clients.stop()  # before pod B goes: what it answers until then is the play's
    names = ("gateway.stopping", "cache.stop_saved", "listener.requests_cut", "daemon.stopped")
    events = {n: a.events(n) for n in names}
    return Play(list(clients.outcomes), update_s, code, front, long, events)


def run(ctx: Context) -> list[Result]:
    return rows(play(ctx, before=ctx.reps(200, 40), after=ctx.reps(200, 40)))


def rows(got: Play) -> list[Result]:
    """The lost requests (the target: none) and the update's duration."""
    lost = [o for o in got.outcomes if o.lost]
    statuses = Counter(str(o.status or o.error.split(":")[0]) for o in got.outcomes)
    long_whole = bool(got.long.get("done")) and got.long.get("status") == 200
    extra = {
        "clients": CLIENTS,
        "requests": len(got.outcomes),
        "outcomes": dict(statuses),
        "each": [[round(o.began, 3), round(o.ms, 1), o.status, o.error] for o in got.outcomes],
        "connections_per_pod": {"a": got.front.connections[got.front.pods[0]],
                                "b": got.front.connections[got.front.pods[1]]},
        "unrouted": got.front.unrouted,
        "long_stream": got.long,
        "old_pod_exit": got.old_exit,
        "shutdown_delay_s": SHUTDOWN_DELAY_S,
    }  # fmt: skip
    lost_row = Result(
        "rollout lost requests", len(got.outcomes), "requests", [float(len(lost))], [0.0],
        "overhead", "max", 0.0, "0 lost", note=json.dumps(dict(statuses)),
        also_ok=long_whole and got.old_exit == 0, extra=extra,
    )  # fmt: skip
    duration_row = Result(
        "rollout duration", 1, "s", [got.update_s], [SHUTDOWN_DELAY_S], "overhead", "none",
        None, "info: B launched to A exited; floor: the drain's delay",
    )  # fmt: skip
    return [lost_row, duration_row]
