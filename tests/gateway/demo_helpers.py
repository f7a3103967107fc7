"""`llamad --demo` as a person starts it: its fixed ports, its own config and state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from helpers import wait_for

from llamad.daemon.demo import GATEWAY

BASE = f"http://{GATEWAY}"


def models() -> dict[str, str] | None:
    """The demo gateway's models and their states, once it answers."""
    try:
        data = httpx.get(f"{BASE}/v1/models", timeout=1).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return {m["id"]: m["llamad"]["state"] for m in data}


@contextmanager
def demo(stderr: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The demo, once its gateway lists its models; stopped with SIGTERM (exit 0) after."""
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llamad", "--demo", "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=os.environ.copy(),
        )
        try:
            # Its own gateway, bound: the fixed port answers for any demo running here.
            wait_for(lambda: _listening(stderr, proc), 30, "the demo's gateway listening")
            wait_for(models, 30, "the demo's gateway")
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0


def _listening(stderr: Path, proc: subprocess.Popen[bytes]) -> bool:
    text = stderr.read_text(encoding="utf-8", errors="replace")
    if proc.poll() is not None:
        last = text.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        raise AssertionError(f"the demo exited {proc.returncode}: {last[0]}")
    return '"gateway.listening"' in text
