"""A pull onto a real, small disk (a 2 MiB tmpfs holding the pull's stores): a file bigger
than the disk is refused before a byte is written; a disk that fills up midway (another
program's file) stops the pull with one clear line and leaves no partial file; the daemon
serves on, and the same pull succeeds once there is room."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hub_stand_in import Hub

from llamad.daemon.tinymodel import Shape, write_tiny_model

pytestmark = pytest.mark.timeout(120)

DISK = 2 * 1024 * 1024
GGUF = "application/vnd.ollama.image.model"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs as the daemon's home: its pull folder, and its hub cache (linked)."""
    disk = tmp_path / "home"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        (disk / "models").mkdir()
        (disk / "hub").mkdir()
        (tmp_path / "hub").symlink_to(disk / "hub")
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False, timeout=10)


@pytest.fixture
def daemon_env(small_disk: Path) -> dict[str, str]:
    return {}  # the disk is mounted before the daemon starts, and unmounted after it stops


@pytest.fixture
def mid_model(tmp_path: Path) -> bytes:
    """About 1.2 MB: room for it on the empty disk, none once the disk fills."""
    return write_tiny_model(tmp_path / "mid.gguf", shape=Shape(n_embd=128)).read_bytes()


def _fill(disk: Path, leave: int = 256 * 1024) -> Path:
    """Another program's file taking all but `leave` bytes of the disk."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        f.write(b"\1" * (shutil.disk_usage(disk).free - leave))
    return filler


def _pull_filling_midway(base: str, hub: Hub, disk: Path, ref: str, key: str, size: int) -> Any:
    """Pull `ref`, the disk filled once its file `key` is under way; the last line."""
    hub.released.clear()
    hub.hold_after[key] = 64 * 1024
    with httpx.stream("POST", f"{base}/api/pull", json={"model": ref}, timeout=60) as pulling:
        lines = (json.loads(line) for line in pulling.iter_lines() if line.strip())
        for event in lines:
            if event.get("total") == size:
                break
        filler = _fill(disk)
        hub.released.set()
        last = [*lines][-1]
    return last, filler


def _left(disk: Path) -> tuple[list[Path], int]:
    """Partial files on the disk, and the bytes its files but the filler hold (a small
    JSON record, a manifest's config blob: never a model's data)."""
    files = [p for p in disk.rglob("*") if p.is_file() and p.name != "filler"]
    partial = [p for p in files if p.name.endswith(("-partial", ".incomplete"))]
    return partial, sum(p.stat().st_size for p in files)


def test_a_pull_onto_a_small_disk(
    daemon: Any, hub: Hub, small_disk: Path, mid_model: bytes
) -> None:
    ld, base, cache = daemon
    hub.repos["someone/Large-GGUF"] = {"large-Q4_K_M.gguf": b"\0" * (DISK + 1)}
    hub.repos["someone/Mid-GGUF"] = {"mid-Q4_K_M.gguf": mid_model}
    hub.ollama["midllama:1b"] = [(GGUF, mid_model)]

    big = {"model": "someone/Large-GGUF:Q4_K_M", "stream": False}
    error = httpx.post(f"{base}/api/pull", json=big, timeout=60).json()["error"]
    assert error.startswith(f"not enough disk space in {cache}: {DISK + 1} bytes needed"), error
    assert _left(small_disk) == ([], 0)

    for ref, key in [
        ("hf.co/someone/Mid-GGUF:Q4_K_M", "mid-Q4_K_M.gguf"),
        ("midllama:1b", "sha256:" + hashlib.sha256(mid_model).hexdigest()),
    ]:
        last, filler = _pull_filling_midway(base, hub, small_disk, ref, key, len(mid_model))
        assert "the disk filled up during the download (no space left in" in last["error"]
        assert "\n" not in last["error"]
        partial, held = _left(small_disk)
        assert partial == [], ref  # nothing partial left behind
        assert held < 4096, (ref, held)
        filler.unlink()
        assert ld.ctl("pull", ref).returncode == 0  # room again: the same pull succeeds
        chat = {"model": ref, "messages": [{"role": "user", "content": "hi"}], "stream": False}
        reply = httpx.post(
            f"{base}/api/chat", json={**chat, "options": {"num_predict": 2}}, timeout=60
        )
        assert reply.status_code == 200, reply.text
        assert ld.ctl("rm", ref).returncode == 0  # and the disk is empty for the next
    failed = ld.events("library.pull_failed")
    assert len(failed) == 3
    assert all("exception" not in e for e in failed)  # said, not a traceback
