"""No stranger shuts the gateway or kills an instance (issue #23): limits on heads and
bodies, a request deadline and a fair share of connections, on the OpenAI and the Ollama
routes, against a real llamad and llama-server.

The daemon runs under a 512-descriptor limit, so its gateway holds 96 connections and
one address 24 of them; a second loopback address (127.0.0.2...) is another client.
"""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from flood import Sender, client, connect, head, read_answer, rss
from gateway_helpers import TINY, Gw, chat, gateway
from helpers import wait_for

# The request deadline here; the default is 60 s.
DEADLINE = 2.0
OPENAI, OLLAMA = "/v1/chat/completions", "/api/chat"


def nofile(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


@pytest.fixture
def gw(tiny_model: Path) -> Iterator[Gw]:
    # The flood's request heads say `Host: x`.
    with gateway(
        tiny_model,
        {"a": TINY},
        preexec_fn=nofile(512),
        request_timeout=DEADLINE,
        allowed_hosts=["x"],
    ) as g:
        yield g


def port(gw: Gw) -> int:
    return int(gw.base.rsplit(":", 1)[1])


def body_for(path: str) -> dict[str, Any]:
    if path == OLLAMA:
        # A few tokens, as chat() asks of OpenAI: unbounded, the tiny model writes until its
        # context is full, which a busy machine takes longer than the client waits.
        return {
            "model": "a",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": False,
            "options": {"num_predict": 3},
        }
    return chat("a")


def served(gw: Gw, path: str, source: str = "127.0.0.2") -> int:
    """The status of one ordinary request from `source`."""
    with client(source) as c:
        return c.post(gw.base + path, json=body_for(path)).status_code


def refused(gw: Gw, reason: str) -> float:
    """`llamad_connections_refused_total` for the gateway and `reason`."""
    for line in metrics(gw.ld.socket).splitlines():
        labels = f'{{listener="gateway",reason="{reason}"}}'
        if line.startswith("llamad_connections_refused_total" + labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def metrics(sock: Path) -> str:
    """The daemon's Prometheus text, over its control socket."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock))) as c:
        return c.get("http://x/metrics", timeout=5).text


def assert_shape(path: str, doc: Any, code: str) -> None:
    """Ollama's `{"error": "..."}` under /api, OpenAI's error object elsewhere."""
    if path == OLLAMA:
        assert isinstance(doc["error"], str), doc
    else:
        assert doc["error"]["code"] == code, doc
        assert doc["error"]["type"] == "invalid_request_error", doc


@pytest.mark.timeout(90)
@pytest.mark.parametrize("path", [OPENAI, OLLAMA])
def test_silent_bodies_from_one_address_leave_others_served(gw: Gw, path: str) -> None:
    """128 heads promising bodies that never come, from loopback: loopback gets its
    share, the rest are turned away, and the silent ones get a 408 at the deadline. On a
    keyless gateway every local process is one client (N4: any of them may send from any
    of 127/8), so the others are served once the deadline has freed the share; on a keyed
    one a stranger's head gets its 401 before its body, and the key holder its place."""
    with ExitStack() as stack:
        held: list[socket.socket] = []
        for n in range(128):
            sock = stack.enter_context(connect(port(gw)))
            framing = "Content-Length: 100" if n % 2 else "Transfer-Encoding: chunked"
            try:
                sock.sendall(head(path, "Content-Type: application/json", framing))
            except OSError:
                continue
            held.append(sock)
        answers = [read_answer(s, DEADLINE + 5) for s in held]
        for _ in range(5):
            assert served(gw, path) == 200
    timed_out = [doc for status, doc in answers if status == 408]
    assert 16 <= len(timed_out) <= 24, [a[0] for a in answers]  # its share: 96 / 4
    assert_shape(path, timed_out[0], "deadline")
    assert gw.ld.events("connection.refused", reason="share", client="loopback")
    assert refused(gw, "share") >= 100
    assert refused(gw, "deadline") >= 16


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", [OPENAI, OLLAMA])
def test_trickled_and_endless_chunked_bodies_are_cut_at_the_deadline(gw: Gw, path: str) -> None:
    """A body at a byte per 0.1 s, and a chunked body that never ends: 408 at the deadline."""
    for framing, piece in (
        ("Content-Length: 100000", b"x"),
        ("Transfer-Encoding: chunked", b"1\r\nx\r\n"),
    ):
        with connect(port(gw)) as sock:
            t0 = time.monotonic()
            sock.sendall(head(path, framing))
            with Sender(sock, piece, pause=0.1):
                status, doc = read_answer(sock, DEADLINE + 5)
            took = time.monotonic() - t0
        assert status == 408, (framing, status)
        assert DEADLINE - 0.1 <= took <= DEADLINE + 1.5, took
        assert_shape(path, doc, "deadline")
    assert served(gw, path, "127.0.0.1") == 200


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", [OPENAI, OLLAMA])
def test_a_90_mb_body_gets_413_at_once_and_never_reaches_llama_server(gw: Gw, path: str) -> None:
    """Content-Length over `max_body` (32 MiB by default): 413 within a second, with the
    body unread, and llama-server stays idle."""
    server = psutil.Process(gw.ld.running("a") or 0)
    cpu0 = sum(server.cpu_times()[:2])
    with connect(port(gw)) as sock:
        t0 = time.monotonic()
        sock.sendall(head(path, "Content-Type: application/json", "Content-Length: 90000000"))
        with Sender(sock, b'{"model": "a", "messages": [' + b" " * 65536):
            status, doc = read_answer(sock, 5)
        took = time.monotonic() - t0
    assert status == 413
    assert took < 1.0
    assert_shape(path, doc, "body_too_large")
    # A client that writes its whole body before it reads gets the answer too.
    with client("127.0.0.1") as c:
        assert c.post(gw.base + path, content=b" " * 90_000_000).status_code == 413
    time.sleep(0.5)  # llama-server's CPU over a moment in which it had nothing to do
    assert sum(server.cpu_times()[:2]) - cpu0 < 0.3
    assert gw.ld.events("connection.refused", reason="body_too_large", client="127.0.0.1")


@pytest.mark.timeout(90)
def test_parallel_big_posts_leave_the_daemon_rss_flat(gw: Gw) -> None:
    """Eight 100 MB posts at once, twice: the daemon's RSS stays within a few MB."""

    def post(path: str) -> int:
        with connect(port(gw)) as sock:
            sock.sendall(head(path, "Content-Length: 100000000"))
            with Sender(sock, b" " * 262144, seconds=3):
                return read_answer(sock, 10)[0]

    def wave() -> list[int]:
        out: list[int] = []
        threads = [
            threading.Thread(target=lambda p=p: out.append(post(p))) for p in [OPENAI, OLLAMA] * 4
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return out

    before = rss(gw.ld.proc.pid)
    assert wave() == [413] * 8
    assert wave() == [413] * 8
    assert rss(gw.ld.proc.pid) - before < 4 * 2**20


@pytest.mark.timeout(90)
def test_header_flood_gets_431_and_kills_no_instance(tiny_model: Path) -> None:
    """Four connections streaming header lines, reconnecting after each refusal, with
    probes every 0.2 s that fail after two misses of 0.5 s: each flood gets a 431, the
    daemon's RSS stays flat, and the instance is never killed."""
    fast = {"health_interval": 0.2, "health_timeout": 0.5, "unhealthy_after": 2}
    with gateway(tiny_model, {"a": TINY}, supervise=fast) as gw:
        pid = gw.ld.running("a")

        def flood(seconds: float) -> set[int]:
            statuses: list[int] = []

            def one(path: str) -> None:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    with connect(port(gw)) as sock:
                        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n".encode())
                        with Sender(sock, b"X-h: v\r\n" * 4096):
                            statuses.append(read_answer(sock, 5)[0])

            paths = ["/v1/models", "/api/tags"] * 2
            threads = [threading.Thread(target=one, args=(p,)) for p in paths]
            for t in threads:
                t.start()
            for t in threads:
                t.join(seconds + 10)
            assert statuses
            return set(statuses)

        before = rss(gw.ld.proc.pid)
        assert flood(6) == {431}
        assert rss(gw.ld.proc.pid) - before < 4 * 2**20
        assert gw.ld.running("a") == pid
        assert not gw.ld.events("instance.exited")
        assert gw.state("a") == "running"
        assert served(gw, OPENAI) == 200


@pytest.mark.timeout(90)
def test_idle_reconnect_flood_from_one_address_leaves_others_served(gw: Gw) -> None:
    """One address opening idle connections as fast as it can only churns its own share;
    so do processes spread over 127/8, which are one share (N4)."""
    stop = threading.Event()

    def churn() -> None:
        held: list[socket.socket] = []
        while not stop.is_set():
            with suppress(OSError):
                held.append(connect(port(gw), "127.0.0.1", 1))
            if len(held) > 200:
                held.pop(0).close()
        for s in held:
            s.close()

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        wait_for(lambda: gw.ld.events("connection.refused", reason="share_evicted_idle"), 10)
        assert [served(gw, OPENAI) for _ in range(10)] == [200] * 10
        assert served(gw, OLLAMA) == 200
    finally:
        stop.set()
        thread.join(10)
    with ExitStack() as stack:
        for n in range(3, 7):  # 4 x 24 idle connections, all of loopback one share
            for _ in range(24):
                stack.enter_context(connect(port(gw), f"127.0.0.{n}"))
        assert served(gw, OPENAI, "127.0.0.7") == 200
    assert not gw.ld.events("connection.refused", reason="share")  # none turned away


@pytest.mark.timeout(90)
def test_an_instance_may_take_bigger_bodies(tiny_model: Path) -> None:
    """`[gateway] max_body` for most models; an instance's own `max_body` for it."""
    instances = {"a": TINY, "big": {**TINY, "max_body": "4MiB"}}
    with gateway(tiny_model, instances, max_body="1MiB") as gw:

        def post(model: str, pad: int, path: str = OPENAI) -> int:
            doc = {**body_for(path), "model": model, "padding": " " * pad}
            with client("127.0.0.1") as c:
                return c.post(gw.base + path, content=json.dumps(doc)).status_code

        assert post("a", 2_000_000) == 413
        assert post("big", 2_000_000) == 200
        assert post("big", 2_000_000, OLLAMA) == 200
        assert post("big", 5_000_000) == 413
        assert post("a", 500_000) == 200
