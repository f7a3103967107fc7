"""`llamad --demo` serves the gateway with an on-demand model; llamactl finds its socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from helpers import wait_for

from llamad.daemon.demo import GATEWAY


def _models() -> dict[str, str] | None:
    try:
        data = httpx.get(f"http://{GATEWAY}/v1/models", timeout=1).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return {m["id"]: m["llamad"]["state"] for m in data}


def test_demo_serves_the_gateway_and_llamactl_finds_it(tmp_path: Path) -> None:
    err = (tmp_path / "demo.stderr").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llamad", "--demo", "--log-format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        env=os.environ.copy(),
    )
    try:
        models = wait_for(_models, 30, "the demo's gateway")
        assert models["tiny-lazy"] == "stopped"
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"http://{GATEWAY}/v1/chat/completions", json=body, timeout=30)
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
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        err.close()
    assert "curl 127.0.0.1:18080/v1/models" in (tmp_path / "demo.stderr").read_text()
