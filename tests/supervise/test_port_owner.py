"""Naming a port's holder: psutil on Linux, lsof on macOS (psutil needs root there)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from stand_ins import install_fakes

from llamad.supervise.port_owner import UNKNOWN, port_owner


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
