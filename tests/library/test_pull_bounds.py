"""A pull is held to the sizes its manifest (Ollama) or the repo's listing (Hugging Face)
declares: a server that streams more is stopped as soon as the declared size is passed,
nothing of the file is kept, and the disk-space check made for the declared sizes holds."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_for
from hub_stand_in import Hub

pytestmark = pytest.mark.timeout(120)

GGUF = "application/vnd.ollama.image.model"
DATA = b"declared" * 125  # 1000 bytes: what the manifest and the listing say
OVER = 512 << 20  # what the server streams after them, unless stopped
# What may leave the server before the client stops it: one read chunk and the sockets'
# buffers, never a sizeable part of OVER.
SLACK = 32 << 20


def _pull(base: str, model: str) -> str:
    reply = httpx.post(f"{base}/api/pull", json={"model": model, "stream": False}, timeout=90)
    error: str = reply.json().get("error", "")
    return error


def _stopped(hub: Hub, key: str) -> int:
    wait_for(lambda: key in hub.ended, 30, f"the stand-in's stream of {key} ended")
    return hub.sent[key]


def test_an_ollama_blob_past_its_declared_size_is_stopped(
    daemon: Any, hub: Hub, tmp_path: Path
) -> None:
    _ld, base, _cache = daemon
    hub.ollama["overllama:1b"] = [(GGUF, DATA)]
    digest = "sha256:" + hashlib.sha256(DATA).hexdigest()
    hub.oversend[digest] = OVER
    error = _pull(base, "overllama:1b")
    assert f"{digest}: the server sent more than the 1000 bytes declared for it" in error
    assert _stopped(hub, digest) < SLACK
    store = tmp_path / "home" / "models" / ".ollama"
    assert [p.name for p in (store / "blobs").iterdir() if digest[7:] in p.name] == []
    assert not (store / "manifests" / "registry.ollama.ai" / "library" / "overllama").exists()


def test_a_hf_file_past_its_listed_size_is_stopped(daemon: Any, hub: Hub) -> None:
    _ld, base, cache = daemon
    hub.repos["someone/Over-GGUF"] = {"over-Q4_K_M.gguf": DATA}
    hub.oversend["over-Q4_K_M.gguf"] = OVER
    sha = hashlib.sha256(DATA).hexdigest()
    error = _pull(base, "someone/Over-GGUF:Q4_K_M")
    assert f"sha256:{sha}: the server sent more than the 1000 bytes declared for it" in error
    assert _stopped(hub, "over-Q4_K_M.gguf") < SLACK
    repo = cache / "models--someone--Over-GGUF"
    assert [p for p in repo.rglob("*") if p.is_file()] == []  # no blob, no .incomplete
    # A listing that gives a size other than the file's own: refused before a byte.
    hub.repos["someone/Liar-GGUF"] = {"liar-Q4_K_M.gguf": DATA}
    hub.claimed_size["liar-Q4_K_M.gguf"] = 10
    error = _pull(base, "someone/Liar-GGUF:Q4_K_M")
    assert "gives its size as 1000 bytes here and 10 in the repo's listing" in error
    liar = cache / "models--someone--Liar-GGUF"
    assert [p for p in liar.rglob("*") if p.is_file()] == []


def test_a_fifo_or_a_link_at_a_partial_files_name_is_replaced(
    daemon: Any, hub: Hub, tmp_path: Path
) -> None:
    """Someone's FIFO would hold the download's open forever, and a link would have it
    append to the file it points at: neither is resumed, both are replaced."""
    _ld, base, _cache = daemon
    blobs = tmp_path / "home" / "models" / ".ollama" / "blobs"
    blobs.mkdir(parents=True)
    model, params = (hashlib.sha256(d).hexdigest() for _, d in hub.ollama["tinyllama:1b"][:2])
    os.mkfifo(blobs / f"sha256-{model}-partial")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (blobs / f"sha256-{params}-partial").symlink_to(victim)
    assert _pull(base, "tinyllama:1b") == ""
    assert victim.read_bytes() == b"keep"
    assert (blobs / f"sha256-{model}").is_file()
