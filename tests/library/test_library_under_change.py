"""The library under change while requests run: a model whose file is removed finishes
the request in flight (streamed and whole), then drains and disappears; a model copied in
meanwhile (a single file, or a split model's folder) is routable at once, a half-written
one only once complete; the other models' processes are not touched."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from held_request import Held
from helpers import Llamad, wait_for
from library_helpers import library_daemon

from llamad.daemon.tinymodel import write_tiny_model

pytestmark = pytest.mark.timeout(150)

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def library(tmp_path: Path, tiny_model: Path) -> Iterator[tuple[Llamad, str, Path]]:
    """A daemon whose library is one folder holding three models."""
    models = tmp_path / "models"
    models.mkdir()
    for name in ("streamed", "whole", "steady"):
        shutil.copyfile(tiny_model, models / f"{name}.gguf")
    library = (
        f'[library]\ndirs = ["{models}"]\npull_dir = "{tmp_path}/pulls"\n'
        # Room for the held requests' 400 tokens; one thread each: two llama-servers
        # generating at once with a thread per core spin against each other for the
        # cores, and a 1-second answer can take a minute.
        "[library.defaults]\nctx_size = 1024\nthreads = 1\n"
    )
    with library_daemon(library, {"HOME": str(tmp_path)}) as (ld, base):
        yield ld, base, models


def _chat(base: str, model: str) -> int:
    body = {"model": model, "messages": MESSAGES, "max_tokens": 2}
    return httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60).status_code


def _instances(ld: Llamad) -> set[str]:
    return {i["name"] for i in ld.status()["instances"]}


def test_files_removed_added_and_half_written_while_requests_run(
    library: tuple[Llamad, str, Path], tiny_model: Path
) -> None:
    ld, base, models = library
    assert _chat(base, "steady") == 200
    steady = ld.instance("steady")["pid"]
    held = [Held(base, "streamed"), Held(base, "whole", stream=False)]
    for request in held:
        request.start()
    for request in held:
        assert request.first.wait(60), request.model
    assert {ld.instance(r.model)["state"] for r in held} == {"running"}

    # Staged outside the folder, then moved in and out at once: one burst of changes.
    data = tiny_model.read_bytes()
    staged = models.parent / "staged"
    staged.mkdir()
    (staged / "half.gguf").write_bytes(data[: len(data) // 2])
    shutil.copyfile(tiny_model, staged / "arrived.gguf")
    write_tiny_model(staged / "split" / "parts-Q8_0.gguf", split=8)  # three files, one model
    for name in ("streamed.gguf", "whole.gguf"):
        (models / name).rename(staged / name)
    for name in ("half.gguf", "arrived.gguf", "split"):
        (staged / name).rename(models / name)
    # The removed models answer no new request; their requests in flight run on.
    for name in ("streamed", "whole"):  # each drains on its own, in the background
        ld.wait_event("gateway.draining", in_flight={name: 1}, timeout=15)
    for name in ("streamed", "whole"):
        wait_for(lambda n=name: _chat(base, n) == 404, 15, f"{name} unknown to new requests")
    assert {ld.instance(r.model)["state"] for r in held} == {"running"}
    # What arrived meanwhile is routable at once; what is half written is not.
    wait_for(lambda: _chat(base, "arrived") == 200, 15, "the new model routable")
    assert _chat(base, "parts-Q8_0") == 200
    tags = {t["name"]: t for t in httpx.get(f"{base}/api/tags", timeout=10).json()["models"]}
    parts = sorted((models / "split").iterdir())
    assert tags["parts-Q8_0:latest"]["size"] == sum(p.stat().st_size for p in parts)
    assert _chat(base, "half") == 404

    for request in held:
        request.go.set()
    for request in held:
        request.join(90)
        assert request.status == 200
        assert request.intact(), (request.model, request.lines[-2:], request.body[-200:])
    wait_for(lambda: not {"streamed", "whole"} & _instances(ld), 30, "the removed models gone")
    assert {e["model"] for e in ld.events("library.gone")} == {"streamed", "whole"}

    (models / "half.gguf").write_bytes(data)
    wait_for(lambda: _chat(base, "half") == 200, 15, "the completed file routable")
    assert ld.instance("steady")["pid"] == steady


def test_a_model_copied_in_while_a_removed_one_drains_answers_at_once(
    library: tuple[Llamad, str, Path], tiny_model: Path
) -> None:
    """Issue #26: a removed model drains (a stream runs on it); a model copied in by a
    later change answers before that stream ends, and the stream still ends intact."""
    ld, base, models = library
    held = Held(base, "streamed")
    held.start()
    assert held.first.wait(60)
    (models / "streamed.gguf").rename(models.parent / "streamed.gguf")
    ld.wait_event("config.reloaded", removed=["streamed"], draining=["streamed"], timeout=15)
    shutil.copyfile(tiny_model, models.parent / "arrived.gguf")
    (models.parent / "arrived.gguf").rename(models / "arrived.gguf")
    wait_for(lambda: _chat(base, "arrived") == 200, 30, "the new model routable")
    assert held.is_alive(), "the new model waited for the stream"
    assert ld.status()["daemon"]["draining"] == ["streamed"]
    held.go.set()
    held.join(90)
    assert held.intact(), held.lines[-2:]
    ld.wait_event("config.drained", instance="streamed", outcome="removed", timeout=30)
    assert "streamed" not in _instances(ld)
