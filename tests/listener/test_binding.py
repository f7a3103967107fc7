"""Listeners wait for their address: a port still held, or an address not up yet, is
tried again with backoff, shown in status, and served as soon as the bind succeeds."""

from __future__ import annotations

import asyncio
import errno
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import free_port, until

import llamad
from llamad.cli.listener_lines import listener_lines
from llamad.listener.binding import Binding, Bindings, bind_patiently, reason
from llamad.listener.tcp import bind_tcp, serve_tcp


async def hello(scope: dict[str, object], receive: object, send: object) -> None:
    assert callable(send)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.fixture
def held() -> Iterator[tuple[socket.socket, int]]:
    """A port a test socket listens on (as a llamad still stopping would)."""
    port = free_port()
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    try:
        yield sock, port
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("exc", "why"),
    [
        (OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"), "address not available"),
        (OSError(errno.EADDRINUSE, "Address already in use"), "address in use"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "name not resolved"),
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure"), "name not resolved"),
        (OSError(errno.EACCES, "Permission denied"), None),
        (socket.gaierror(socket.EAI_SERVICE, "Servname not supported"), None),
    ],
)
def test_only_what_waiting_mends_is_waited_for(exc: OSError, why: str | None) -> None:
    assert reason(exc) == why


def test_an_address_not_configured_here_is_one_to_wait_for() -> None:
    # 192.0.2.0/24 is TEST-NET-1: no interface of this machine has it.
    with pytest.raises(OSError, match="assign requested address") as caught:
        bind_tcp("192.0.2.1", free_port()).close()
    assert reason(caught.value) == "address not available"


async def test_a_held_port_is_waited_for_and_served_once_released(
    held: tuple[socket.socket, int],
) -> None:
    sock, port = held
    binding = Binding("gateway", f"127.0.0.1:{port}")
    shutdown, bound = asyncio.Event(), asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(serve_tcp(hello, "127.0.0.1", port, shutdown, bound.set, binding=binding))
        await until(lambda: binding.state == "waiting", 5, "the listener waiting")
        doc = binding.to_dict()
        assert doc["error"] == "address in use"
        assert doc["next_try_s"] is not None
        assert not bound.is_set()
        sock.close()  # the port is free: the next try takes it
        await asyncio.wait_for(bound.wait(), 10)
        assert binding.to_dict()["state"] == "listening"
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{port}/")
        assert answer.text == "hello"
        shutdown.set()


async def test_an_address_that_comes_up_later_is_bound_then() -> None:
    """A 127.0.0.x address standing in for one (Tailscale's) not up for the first tries."""
    port, tries = free_port(), []

    def bind() -> socket.socket:
        tries.append(1)
        if len(tries) <= 3:
            raise OSError(errno.EADDRNOTAVAIL, "Can't assign requested address")
        return bind_tcp("127.0.0.2", port)

    binding, seen = Binding("remote", f"127.0.0.2:{port}"), []
    waiting = asyncio.create_task(
        bind_patiently(bind, binding, asyncio.Event(), initial=0.01, maximum=0.04)
    )
    while not waiting.done():
        seen.append(binding.to_dict())
        await asyncio.sleep(0)
    sock = await waiting
    assert sock is not None
    sock.close()
    assert (binding.tries, binding.state, binding.error) == (4, "listening", None)
    assert any(d["state"] == "waiting" and d["error"] == "address not available" for d in seen)


async def test_a_shutdown_ends_the_wait() -> None:
    def bind() -> socket.socket:
        raise OSError(errno.EADDRNOTAVAIL, "Can't assign requested address")

    binding, shutdown = Binding("gateway", "100.64.1.2:8080"), asyncio.Event()
    waiting = asyncio.create_task(bind_patiently(bind, binding, shutdown, initial=30))
    await until(lambda: binding.state == "waiting", 5, "the listener waiting")
    shutdown.set()
    assert await asyncio.wait_for(waiting, 5) is None


async def test_a_failure_waiting_cannot_mend_is_raised_and_shown() -> None:
    def bind() -> socket.socket:
        raise OSError(errno.EACCES, "Permission denied")

    binding = Binding("gateway", "0.0.0.0:80")
    with pytest.raises(PermissionError):
        await bind_patiently(bind, binding, asyncio.Event())
    assert binding.to_dict() == {
        "listen": "0.0.0.0:80",
        "state": "failed",
        "error": "[Errno 13] Permission denied",
        "tries": 1,
        "next_try_s": None,
    }


def test_status_says_which_listener_waits_and_for_what() -> None:
    listeners = Bindings()
    listeners.add("gateway", "100.64.1.2:8080").waiting("address not available", 4.0)
    listeners.add("remote", "0.0.0.0:80").failed("[Errno 13] Permission denied")
    listeners.add("spare", "127.0.0.1:1").bound()
    assert listener_lines({"daemon": {"listeners": listeners.to_dict()}}) == [
        "gateway waiting for 100.64.1.2:8080 (address not available), next try in 4 s",
        "remote control not listening: 0.0.0.0:80 cannot be bound ([Errno 13] Permission denied)",
    ]


def test_every_tcp_listener_binds_through_the_one_rule() -> None:
    """Only `serve_tcp` binds a listening TCP socket, and every caller in llamad hands it
    the `Binding` that status shows: no listener can bind around the wait."""
    root = Path(llamad.__file__).parent
    binders, callers = set(), {}
    for path in root.rglob("*.py"):
        text, name = path.read_text(), str(path.relative_to(root))
        if re.search(r"\bbind_tcp\(|sock\.listen\(", text):
            binders.add(name)
        for call in re.findall(r"await serve_tcp\((.*?)\n\s*\)", text, re.S):
            callers.setdefault(name, []).append("binding=binding" in call)
    assert binders == {"listener/tcp.py", "common/unixsock.py"}
    assert callers == {"api/tcp.py": [True], "daemon/gateway.py": [True]}
