"""A store's files are opened only when they are regular files and read with a bound: a
FIFO (which blocks an open until a writer comes) or a link to /dev/zero (which never ends
a read) in any store is listed with a reason or left out, the scan returns at once, and a
daemon reading such a store still reloads and exits on SIGTERM."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from helpers import Llamad, free_port, short_dir, wait_for
from library_helpers import hf_cache, ollama_store

from llamad.common.storefile import open_regular, read_small
from llamad.library.model import Found
from llamad.library.scan import Place, scan

pytestmark = pytest.mark.timeout(60)

SYSTEM = "application/vnd.ollama.image.system"
PARAMS = "application/vnd.ollama.image.params"
TEMPLATE = "application/vnd.ollama.image.template"
MODEL = "application/vnd.ollama.image.model"
# Room a bounded scan needs above what the process holds; a whole read of /dev/zero hits it.
_HEADROOM = 1 << 30


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@contextmanager
def memory_cap() -> Iterator[None]:
    """This process's address space capped a little above its size for the block: a read
    that would take the host's memory fails here with MemoryError instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + _HEADROOM, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _cap_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))


def _blob(manifest: Path, media: str) -> Path:
    doc = json.loads(manifest.read_text())
    digest = next(x["digest"] for x in doc["layers"] if x["mediaType"] == media)
    return manifest.parents[4] / "blobs" / digest.replace(":", "-")


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def to_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _timed_scan(places: list[Place], pull: Path) -> Found:
    began = time.monotonic()
    with memory_cap():
        found = scan(places, pull)
    assert time.monotonic() - began < 10
    return found


def test_the_helper_refuses_fifos_devices_and_big_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "big").write_bytes(b"x" * 101)
    (tmp_path / "small").write_bytes(b"x" * 100)
    with memory_cap():
        for name in ("fifo", "zero"):
            with pytest.raises(OSError, match="not a regular file"):
                read_small(tmp_path / name, 100)
            with pytest.raises(OSError, match="not a regular file"):
                open_regular(tmp_path / name)
        with pytest.raises(OSError, match="larger than 100 bytes"):
            read_small(tmp_path / "big", 100)
    assert read_small(tmp_path / "small", 100) == b"x" * 100


@pytest.mark.parametrize("spoil", [fifo, to_zero], ids=["fifo", "dev-zero"])
def test_an_ollama_layer_that_is_no_file_is_left_out_with_a_note(
    tmp_path: Path, tiny_model: Path, spoil: Callable[[Path], None]
) -> None:
    store = tmp_path / "ollama"
    both = ollama_store(store, "both", "latest", tiny_model, params={"num_ctx": 512}, system="hi")
    spoil(_blob(both, SYSTEM))
    params = ollama_store(store, "params", "latest", tiny_model, params={"num_ctx": 640})
    spoil(_blob(params, PARAMS))
    model = ollama_store(store, "model", "latest", tiny_model, template="x")
    found = _timed_scan([Place(store)], tmp_path / "pull")
    names = {m.name: m for m in found.models}
    assert names["both"].problem is None
    assert names["both"].settings == {"ctx_size": 512}  # the readable layer still counts
    assert names["both"].prompt is not None
    assert names["both"].prompt.system is None
    assert "its system layer is left out (not a regular file)" in (names["both"].note or "")
    assert "ctx_size" not in names["params"].settings
    assert "its params layer is left out (not a regular file)" in (names["params"].note or "")
    # The model's own blob: listed with the reason, never opened.
    spoil(_blob(model, MODEL))
    again = {m.name: m for m in _timed_scan([Place(store)], tmp_path / "pull").models}
    assert again["model"].problem == "not a regular file"


@pytest.mark.parametrize("spoil", [fifo, to_zero], ids=["fifo", "dev-zero"])
def test_folders_and_the_hf_cache_skip_what_is_no_file(
    tmp_path: Path, tiny_model: Path, spoil: Callable[[Path], None]
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "odd-Q4_0.gguf").write_bytes(b"")
    spoil(folder / "odd-Q4_0.gguf")
    (folder / "ok-Q4_0.gguf").write_bytes(tiny_model.read_bytes())
    hub = tmp_path / "hub"
    snap = hf_cache(hub, "someone/Tiny-GGUF", {"tiny-Q4_K_M.gguf": tiny_model})
    spoil(hub / "models--someone--Tiny-GGUF" / "refs" / "main")  # the commit: unreadable
    odd = hf_cache(hub, "someone/Odd-GGUF", {"odd-Q4_K_M.gguf": tiny_model})
    spoil(Path(os.path.realpath(odd / "odd-Q4_K_M.gguf")))  # the blob the link points at
    found = _timed_scan([Place(folder), Place(hub)], tmp_path / "pull")
    names = {m.name: m for m in found.models}
    assert "odd-Q4_0" not in names
    assert any("odd-Q4_0.gguf: not a regular file; skipped" in w for w in found.warnings)
    assert names["ok-Q4_0"].problem is None
    # refs/main unreadable: the newest (here the only) snapshot is read, with a warning.
    assert names["someone/Tiny-GGUF:Q4_K_M"].path.parent == snap
    assert any("refs/main: unreadable (not a regular file)" in w for w in found.warnings)
    assert "someone/Odd-GGUF:Q4_K_M" not in names
    assert any("odd-Q4_K_M.gguf: not a regular file; skipped" in w for w in found.warnings)


def test_a_daemon_on_such_a_store_reloads_and_exits_on_sigterm(
    tmp_path: Path, tiny_model: Path
) -> None:
    store = tmp_path / "ollama"
    ollama_store(store, "good", "latest", tiny_model)
    d = short_dir()
    port = free_port()
    cfg = d / "llamad.toml"
    cfg.write_text(
        f'[daemon]\nstate_dir = "{d}/state"\n[gateway]\nlisten = "127.0.0.1:{port}"\n'
        f'[library]\ndirs = ["{store}"]\npull_dir = "{tmp_path}/pull"\n'
    )
    base = f"http://127.0.0.1:{port}"
    with Llamad(cfg, preexec_fn=_cap_child) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        # Added while it runs, as the red team did: the next reload reads both.
        spoil = ollama_store(store, "spoilt", "latest", tiny_model, system="hi", params={"a": 1})
        fifo(_blob(spoil, SYSTEM))
        to_zero(_blob(spoil, PARAMS))
        reply = ld.ctl("reload")
        assert reply.returncode == 0, reply.stderr

        def listed() -> bool:
            data = httpx.get(f"{base}/v1/models", timeout=5).json()["data"]
            return "spoilt" in {m["id"] for m in data}

        wait_for(listed, 10, "the spoilt model listed")
        began = time.monotonic()
        assert ld.stop(timeout=15) == 0
        assert time.monotonic() - began < 15
