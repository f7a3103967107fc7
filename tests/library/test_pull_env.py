"""Pulls and their environment: HF_TOKEN is sent to the hub and never written to a log,
an error or the terminal; `llamactl pull` on a terminal redraws one bar per file;
HF_HUB_OFFLINE refuses a pull in one line, touching no network."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest
from helpers import wait_for
from hub_stand_in import Hub

from llamad.library.hf_pull import pull_hf
from llamad.library.progress import PullError
from llamad.library.refs import HfRef

pytestmark = pytest.mark.timeout(120)

SECRET = "hf_llamadTestSecretToken0123456789"


@pytest.fixture
def daemon_env() -> dict[str, str]:
    return {"HF_TOKEN": SECRET}


def _tmux(sock: str, *args: str) -> str:
    done = subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=10)
    return done.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_token_is_sent_never_shown_and_the_terminal_gets_a_bar(
    daemon: Any, hub: Hub, tmp_path: Path
) -> None:
    ld, _base, _cache = daemon
    missing = ld.ctl("pull", "hf.co/someone/Missing-GGUF:Q4_K_M")
    assert missing.returncode == 1
    assert "no such repository" in missing.stderr
    sock = str(tmp_path / "tmux.sock")  # a tmux server of its own, its socket kept here
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\nset -g status off\n")
    cmd = [sys.executable, "-m", "llamad.cli.main", "--socket", str(ld.socket)]
    cmd += ["pull", "hf.co/someone/Tiny-GGUF:Q4_K_M"]
    _tmux(
        sock,
        "-f",
        str(conf),
        "new-session",
        "-d",
        "-s",
        "pull",
        "-x",
        "120",
        "-y",
        "20",
        " ".join(cmd),
    )

    def finished() -> str | None:
        # From the start of its history: tmux may size the pane after the first lines
        # came, scrolling them out of the visible part.
        shown = _tmux(sock, "capture-pane", "-p", "-S", "-", "-t", "pull")
        return shown if "success" in shown else None

    try:
        screen = wait_for(finished, 60, "llamactl pull to finish on the terminal")
    finally:
        _tmux(sock, "kill-server")
    lines = [ln.rstrip() for ln in screen.splitlines() if ln.strip()]
    bars = [ln for ln in lines if "%" in ln]
    assert len(bars) == 1, lines  # redrawn in place, not a line per update
    assert "#" * 30 in bars[0]
    assert "100%" in bars[0]
    assert lines[0] == "pulling manifest"
    assert f"Bearer {SECRET}" in hub.auths  # honoured...
    log = ld.stderr_path.read_text(encoding="utf-8")
    assert "library.pull_failed" in log
    assert SECRET not in log + screen + missing.stderr + missing.stdout  # ...never shown


def test_offline_a_pull_says_it_cannot_download_in_one_line(
    hub: Hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    events: list[dict[str, Any]] = []
    with pytest.raises(PullError) as refused:
        pull_hf(HfRef("someone/Tiny-GGUF", "Q4_K_M"), events.append)
    assert str(refused.value) == "someone/Tiny-GGUF: HF_HUB_OFFLINE is set; nothing can be pulled"
    assert hub.auths == []  # no request reached the hub
    assert not (tmp_path / "hub").exists()
