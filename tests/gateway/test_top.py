"""`llamactl top`: one snapshot, and the live view under tmux (q and Ctrl-C quit)."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_helpers import TINY, chat, gateway
from helpers import short_dir, wait_for
from rich.console import Console

from llamad.cli.top import memory_bar, render

pytestmark = pytest.mark.timeout(60)
TMUX = shutil.which("tmux")
SHOTS = os.environ.get("LLAMAD_SCREENSHOTS")


def test_render_shows_models_progress_memory_and_keys() -> None:
    doc = {
        "daemon": {"version": "1", "pid": 7},
        "gateway": {
            "listen": "127.0.0.1:8080", "budget_bytes": 4 * 1024**3, "used_bytes": 1024**3,
            "left_bytes": 3 * 1024**3, "keys": {"alice": {"requests": 3, "errors": 1,
            "prompt_tokens": 30, "completion_tokens": 12}},
        },
        "instances": [
            {"name": "a", "state": "running", "gateway": {"in_flight": 2, "queued": 1,
             "requests_per_min": 9, "tokens_per_s": 41.25, "ttft_p50_s": 0.12,
             "cache_hit_ratio": 0.875, "footprint_bytes": 1024**3}},
            {"name": "b", "state": "starting", "gateway": {"load_progress": {"elapsed_s": 1.0,
             "expected_s": 4.0, "fraction": 0.25, "basis": "this model"}}},
            {"name": "not-routed", "state": "running"},
        ],
    }  # fmt: skip
    text = _text(render(doc))
    bar = next(line for line in text.splitlines() if line.startswith("memory"))
    # A quarter of 30 cells used (7.5 of them), the rest blank.
    assert bar.startswith("memory [" + "█" * 7 + "▌" + " " * 22 + "] used 1.0G of 4.0G, left 3.0G")
    a = next(line for line in text.splitlines() if line.startswith("a "))
    assert a.split() == ["a", "running", "2", "1", "9", "41.2", "120ms", "88%", "1.0G", "-"]
    assert any(line.split()[:3] == ["b", "loading", "25%"] for line in text.splitlines())
    assert "b: loading 25% (1.0s of ~4.0s, from this model)" in text
    assert "alice  3" in text
    assert "not-routed" not in text
    assert "no budget" in _text(memory_bar({"used_bytes": 5}))


def _text(renderable: Any) -> str:
    """What `top --once` prints for `renderable` when not on a terminal: no colour."""
    console = Console(file=io.StringIO(), width=120, no_color=True)
    console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_once_prints_a_snapshot(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY, "lazy": {**TINY, "on_demand": True}}) as gw:
        httpx.post(f"{gw.base}/v1/chat/completions", json=chat("tiny", 3), timeout=10)
        out = wait_for(lambda: _with(gw.ld.ctl("top", "--once").stdout, "(no key)"), 5)
        assert "gateway on 127.0.0.1:" in out
        assert out.count("running") == 1
        assert "lazy" in out
        # Not a terminal: one snapshot even without --once.
        assert "MODEL" in gw.ld.ctl("top").stdout


@contextmanager
def tmux(command: list[str]) -> Iterator[tuple[str, Path]]:
    """`command` in a detached tmux session on a private server; killed at the end."""
    sock = short_dir() / "tmux"
    base = [str(TMUX), "-S", str(sock)]
    shell = shlex.join(command) + "; echo EXITED $?; sleep 30"
    subprocess.run([*base, "new-session", "-d", "-x", "120", "-y", "30", shell], check=True)
    try:
        yield str(TMUX), sock
    finally:
        subprocess.run([*base, "kill-server"], check=False, capture_output=True)


def _with(text: str, needle: str) -> str | None:
    return text if needle in text else None


def _pane(sock: Path) -> str:
    out = subprocess.run(
        [str(TMUX), "-S", str(sock), "capture-pane", "-p"], capture_output=True, text=True
    )
    return out.stdout


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("keys", ["q", "C-c"])
def test_live_view_under_tmux_quits_on_q_and_ctrl_c(
    tiny_model: Path, keys: str, tmp_path: Path
) -> None:
    with gateway(tiny_model, {"tiny": TINY, "lazy": {**TINY, "on_demand": True}}) as gw:
        httpx.post(f"{gw.base}/v1/chat/completions", json=chat("tiny", 3), timeout=10)
        argv = [sys.executable, "-m", "llamad.cli.main", "--socket", str(gw.ld.socket)]
        with tmux([*argv, "top", "--interval", "0.3"]) as (binary, sock):
            screen = wait_for(lambda: _with(_pane(sock), "(q to quit)"), 15, "top on screen")
            assert "tiny" in screen
            assert "lazy" in screen
            if SHOTS and keys == "q":
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                (Path(SHOTS) / "top.txt").write_text(screen.rstrip() + "\n")
            subprocess.run([binary, "-S", str(sock), "send-keys", keys], check=True)
            after = wait_for(lambda: _with(_pane(sock), "EXITED"), 10, "top gone")
            assert "EXITED 0" in after
            assert "Traceback" not in after
