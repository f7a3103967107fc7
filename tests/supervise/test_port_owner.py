"""Naming a port's holder: psutil on Linux, lsof on macOS (psutil needs root there)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

import pytest
from stand_ins import install_fakes

from llamad.supervise.port_owner import UNKNOWN, port_owner
from llamad.supervise.process import port_problem


def test_linux_names_the_listener_with_psutil() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_owner(port, "linux").startswith(f"pid {os.getpid()} (")


def test_macos_asks_lsof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = install_fakes(tmp_path, monkeypatch, "lsof")
    fakes.rule("lsof", stdout="p4242\ncllama-server\nf7\n")
    assert port_owner(18080, "darwin") == "pid 4242 (llama-server)"
    assert fakes.calls() == [["lsof", "-nP", "-iTCP:18080", "-sTCP:LISTEN", "-Fpc"]]


def test_macos_without_an_answer_says_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = install_fakes(tmp_path, monkeypatch, "lsof")
    fakes.rule("lsof", code=1)
    assert port_owner(18080, "darwin") == UNKNOWN
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert port_owner(18080, "darwin") == UNKNOWN


async def test_the_lookup_runs_in_a_thread_while_the_loop_goes_on() -> None:
    """The owner lookup waits until the loop has run something else: on the loop, it
    would wait for ever (here: until its deadline, and say so)."""
    loop_ran = threading.Event()
    seen: list[str] = []

    def owner(port: int) -> str:
        seen.append(threading.current_thread().name)
        return "pid 1 (held)" if loop_ran.wait(timeout=5) else "the loop was blocked"

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        lookup = asyncio.ensure_future(port_problem("127.0.0.1", port, owner))
        # Runs on the loop after the lookup's first step, which reaches owner().
        asyncio.get_running_loop().call_soon(loop_ran.set)
        assert await asyncio.wait_for(lookup, 10) == f"port {port} in use by pid 1 (held)"
    assert seen
    assert seen != [threading.main_thread().name]
