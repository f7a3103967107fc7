"""llamad.notify: sd_notify datagrams, checked on a real AF_UNIX socket."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamad.daemon.notify import Notifier, watchdog_loop


@pytest.fixture
def receiver() -> Iterator[tuple[str, socket.socket]]:
    """A bound datagram socket standing in for systemd, under /tmp to keep the path short."""
    directory = tempfile.mkdtemp(prefix="sdn", dir="/tmp")
    path = os.path.join(directory, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(path)
        sock.settimeout(5)
        yield path, sock
    finally:
        sock.close()
        shutil.rmtree(directory)


def test_messages_arrive_as_exact_datagrams(receiver: tuple[str, socket.socket]) -> None:
    """ready, status, watchdog and stopping each send one datagram with the documented bytes."""
    path, sock = receiver
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.ready()
    assert notifier.status("2/3 instances running")
    assert notifier.watchdog()
    assert notifier.stopping("3 running")
    assert notifier.status("1 running, 2 stopped")
    got = [sock.recv(4096) for _ in range(5)]
    assert got == [
        b"READY=1",
        b"STATUS=2/3 instances running",
        b"WATCHDOG=1",
        b"STOPPING=1\nSTATUS=stopping: 3 running",
        b"STATUS=stopping: 1 running, 2 stopped",
    ]


def test_status_newlines_cannot_inject_assignments(receiver: tuple[str, socket.socket]) -> None:
    """A newline in the status text would start a new assignment; it is flattened."""
    path, sock = receiver
    Notifier(path).status("line one\nREADY=1")
    assert sock.recv(4096) == b"STATUS=line one READY=1"


@pytest.mark.skipif(sys.platform != "linux", reason="abstract sockets are Linux-only")
def test_abstract_socket_address() -> None:
    """NOTIFY_SOCKET=@name means the abstract name \\0name."""
    name = f"llamad-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert Notifier.from_env({"NOTIFY_SOCKET": "@" + name}).ready()
        assert sock.recv(4096) == b"READY=1"


def test_unset_socket_is_a_no_op() -> None:
    """Outside systemd nothing is sent and nothing fails."""
    notifier = Notifier.from_env({})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.watchdog() is False
    assert notifier.watchdog_interval() is None


def test_from_env_reads_os_environ(
    receiver: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no mapping given, the process environment is used."""
    path, sock = receiver
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    assert Notifier.from_env().ready()
    assert sock.recv(4096) == b"READY=1"


def test_send_errors_return_false(tmp_path: Path) -> None:
    """A vanished socket or an unsupported address never raises into the daemon."""
    assert Notifier(str(tmp_path / "gone")).ready() is False
    assert Notifier("vsock:2:1234").enabled is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_is_half_of_watchdog_usec(
    env: dict[str, str], expected: float | None
) -> None:
    """Half of WATCHDOG_USEC, and only when WATCHDOG_PID is unset or names us."""
    notifier = Notifier.from_env({"NOTIFY_SOCKET": "/run/notify", **env})
    assert notifier.watchdog_interval() == expected


def test_watchdog_interval_needs_a_socket() -> None:
    """No socket, no pings, whatever WATCHDOG_USEC says."""
    assert Notifier.from_env({"WATCHDOG_USEC": "30000000"}).watchdog_interval() is None


async def test_watchdog_loop_pings_until_stopped(receiver: tuple[str, socket.socket]) -> None:
    """WATCHDOG=1 arrives repeatedly at the interval, and the loop ends once stop is set."""
    path, sock = receiver
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.create_task(watchdog_loop(Notifier(path, watchdog_usec=40_000), stop))
    try:
        for _ in range(3):
            assert await asyncio.wait_for(loop.sock_recv(sock, 64), timeout=5) == b"WATCHDOG=1"
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)


async def test_watchdog_loop_stops_promptly_with_a_long_interval(
    receiver: tuple[str, socket.socket],
) -> None:
    """Setting stop does not wait out a 15 s interval."""
    path, sock = receiver
    stop = asyncio.Event()
    task = asyncio.create_task(watchdog_loop(Notifier(path, watchdog_usec=30_000_000), stop))
    # The first ping proves the loop is inside its 15 s wait (the socket times out in 5 s).
    assert await asyncio.to_thread(sock.recv, 64) == b"WATCHDOG=1"
    stop.set()
    await asyncio.wait_for(task, timeout=2)


async def test_watchdog_loop_returns_without_a_watchdog() -> None:
    """No WATCHDOG_USEC: nothing to do, the coroutine returns at once."""
    await asyncio.wait_for(watchdog_loop(Notifier.from_env({}), asyncio.Event()), timeout=1)
