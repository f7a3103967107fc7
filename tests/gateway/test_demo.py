"""`llamad --demo` serves the gateway with an on-demand model; llamactl finds its socket."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from demo_helpers import BASE, demo, models


def test_demo_serves_the_gateway_and_llamactl_finds_it(tmp_path: Path) -> None:
    with demo(tmp_path / "demo.stderr"):
        assert (models() or {})["tiny-lazy"] == "stopped"
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
    assert "curl 127.0.0.1:18080/v1/models" in (tmp_path / "demo.stderr").read_text()
