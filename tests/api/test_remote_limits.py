"""The remote control listener holds strangers to the same limits as the gateway (issue
#23): heads, bodies, a deadline and a share per address, answered in the control API's
error shape, before any token is looked at."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from flood import Sender, client, connect, head, read_answer
from helpers import Llamad
from remote_helpers import ADMIN, remote_daemon, scratch_dir

from llamad.listener.limits import CONTROL


@pytest.fixture
def remote(tiny_model: Path) -> Iterator[tuple[Llamad, int]]:
    with scratch_dir() as base:
        daemon, url = remote_daemon(base, tiny_model)
        with daemon:
            yield daemon, int(url.rsplit(":", 1)[1])
            assert daemon.stop() == 0


def status_from(port: int, source: str) -> int:
    with client(source) as c:
        auth = {"Authorization": f"Bearer {ADMIN}"}
        return c.get(f"http://127.0.0.1:{port}/v1/status", headers=auth).status_code


@pytest.mark.timeout(60)
def test_heads_and_bodies_past_the_limits_are_refused_unread(
    remote: tuple[Llamad, int],
) -> None:
    daemon, port = remote
    with connect(port) as sock:
        sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n")
        with Sender(sock, b"X-h: v\r\n" * 4096):
            status, doc = read_answer(sock)
    assert status == 431
    assert doc["error"]["code"] == "head_too_large"
    with connect(port) as sock:
        sock.sendall(head("/v1/reload", "Content-Length: 2000000"))
        with Sender(sock, b" " * 65536):
            status, doc = read_answer(sock)
    assert status == 413
    assert doc["error"]["code"] == "body_too_large"
    assert daemon.events("connection.refused", listener="remote", reason="head_too_large")
    assert status_from(port, "127.0.0.1") == 200


@pytest.mark.timeout(60)
def test_slow_heads_from_one_address_leave_others_served(remote: tuple[Llamad, int]) -> None:
    """Forty heads that stop halfway, from one address: it gets its share (a quarter of
    128), each head past it taking the place of the oldest unfinished one; another client
    is served (loopback is one share, so its connection too takes an unfinished head's
    place), and the slow ones get 408 at the head's deadline."""
    daemon, port = remote
    t0 = time.monotonic()
    with ExitStack() as stack:
        held: list[socket.socket] = []
        for _ in range(40):
            sock = stack.enter_context(connect(port))
            try:
                sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                continue
            held.append(sock)
        assert status_from(port, "127.0.0.2") == 200
        answers = [read_answer(s, CONTROL.head_timeout + 5) for s in held]
    timed_out = [doc for status, doc in answers if status == 408]
    assert len(timed_out) == 31, [a[0] for a in answers]
    assert timed_out[0]["error"]["code"] == "deadline"
    assert time.monotonic() - t0 < CONTROL.head_timeout + 3
    assert daemon.events("connection.refused", listener="remote", reason="share_evicted_idle")


@pytest.mark.timeout(60)
def test_unauthenticated_silent_bodies_are_answered_and_closed(
    remote: tuple[Llamad, int],
) -> None:
    """A body that never comes, without a token: 401 at once, and the connection closes
    soon after instead of holding a place until the deadline."""
    _, port = remote
    with connect(port) as sock:
        sock.sendall(head("/v1/reload", "Content-Length: 100"))
        assert read_answer(sock, 5)[0] == 401
        sock.settimeout(CONTROL.request_timeout)
        t0 = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - t0 < CONTROL.request_timeout - 2
