"""A quarantined llama-server killed at exec (Gatekeeper's SIGKILL): the instance's error
names the fix. The flag is read by a stand-in reader (Linux cannot carry it)."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import free_port, write_config
from inprocess import FAST, supervising

from llamad.backends.quarantine import ATTR, Quarantine
from llamad.lifecycle.states import State


def flagged(path: Path) -> Quarantine:
    real = Path(os.path.realpath(path))
    return Quarantine(lambda p: b"0083;6712a1b2;Safari;" if p == real else None)


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


async def test_a_server_killed_at_exec_fails_with_the_fix(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    """The instance's error is the quarantine line: its --help passes (the catalogue was
    read before the flag came, as when a binary is replaced by a download), its start is
    killed before it prints anything."""
    wrapper = executable(
        tmp_path / "bin" / "llama-server",
        f'#!/bin/sh\ncase "$1" in --help|--version) exec "{llama_server}" "$@";; esac\n'
        "kill -9 $$\n",
    )
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state"), "llama_server": str(wrapper)},
        supervise=FAST,
    )
    async with supervising(cfg, quarantine=flagged(wrapper)) as sup:
        inst = await sup.state("a", State.BACKOFF)
        assert inst.record.error == (
            f"macOS will not run {wrapper}: it is quarantined (downloaded); "
            f"run: xattr -d {ATTR} {wrapper}"
        )
