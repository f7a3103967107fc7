"""`llamad --demo` serves the gateway with an on-demand model; llamactl finds its socket."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from demo_helpers import BASE, demo, models
from helpers import wait_for

from llamad.daemon.demo import ON_DEMAND_PORT


@pytest.mark.timeout(180)  # the real model's first answer, on a busy machine
def test_demo_serves_the_gateway_and_llamactl_finds_it(tmp_path: Path) -> None:
    with demo(tmp_path / "demo.stderr"):
        listed = models() or {}
        assert listed["tiny-lazy"] == "stopped"
        # The test extra installs the real model's package: the demo serves it first.
        assert next(iter(listed)) == "gemma"
        wait_for(lambda: (models() or {})["gemma"] == "running", 60, "gemma running")
        ask = {"role": "user", "content": "What is the capital of France?"}
        words = {"model": "gemma", "messages": [ask], "max_tokens": 8, "temperature": 0}
        said = httpx.post(f"{BASE}/v1/chat/completions", json=words, timeout=120).json()
        assert "Paris" in said["choices"][0]["message"]["content"]
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{BASE}/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 200
        status = subprocess.run(
            [sys.executable, "-m", "llamad.cli.main", "status"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert "tiny-lazy" in status.stdout
        assert "gateway on 127.0.0.1:18080" in status.stdout
    printed = (tmp_path / "demo.stderr").read_text()
    assert "curl 127.0.0.1:18080/v1/models" in printed
    assert "gemma (gemma-3-270m, a real small model) on :18084" in printed


def test_a_demo_port_in_use_is_named_and_nothing_starts() -> None:
    """A second demo (or anything on its fixed ports) would half-start and leave the
    first one answering for it: it says which port is held, by what, and exits 1."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", ON_DEMAND_PORT))
        holder.listen()
        run = subprocess.run(
            [sys.executable, "-m", "llamad", "--demo"], capture_output=True, text=True, timeout=30
        )
    assert run.returncode == 1
    # Another developer's demo may hold an earlier port: then that one is named.
    (line,) = run.stderr.splitlines()
    assert re.fullmatch(
        r"llamad: the demo's port 1808[0-4] is in use by pid \d+ \(.+\); stop that first", line
    )
