"""A fake home holding models as Ollama, LM Studio, the Hugging Face cache and a plain
folder lay them out, each with tiny GGUFs; a daemon serving a library and no instances."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import httpx
from helpers import Llamad, free_port, short_dir

from llamad.library.digest import file_sha256


def write_projector(path: Path) -> Path:
    """A tiny GGUF whose architecture is llama.cpp's CLIP: a vision projector's header."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(path, "clip")
    w.add_tensor("mm.0.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def ollama_store(
    root: Path,
    name: str,
    tag: str,
    model: Path,
    extra: list[dict[str, object]] | None = None,
    params: dict[str, object] | None = None,
    namespace: str = "library",
    template: str = "{{ .Prompt }}",
    system: str | None = None,
) -> Path:
    """Put `model` in an Ollama store at `root` as `name:tag`, with a `template` layer
    and a `system` one when given; returns the manifest."""
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)

    def blob(src: bytes | Path, media: str) -> dict[str, object]:
        data = src.read_bytes() if isinstance(src, Path) else src
        digest = hashlib.sha256(data).hexdigest()
        (blobs / f"sha256-{digest}").write_bytes(data)
        return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(data)}

    layers = [blob(model, "application/vnd.ollama.image.model")]
    if params is not None:
        layers.append(blob(json.dumps(params).encode(), "application/vnd.ollama.image.params"))
    layers.append(blob(template.encode(), "application/vnd.ollama.image.template"))
    if system is not None:
        layers.append(blob(system.encode(), "application/vnd.ollama.image.system"))
    layers += extra or []
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": blob(b"{}", "application/vnd.docker.container.image.v1+json"),
        "layers": layers,
    }
    path = root / "manifests" / "registry.ollama.ai" / namespace / name / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    return path


def hf_cache(root: Path, repo: str, files: dict[str, Path], commit: str = "a" * 40) -> Path:
    """Lay `files` out in a hub cache at `root` as huggingface_hub does: blobs named by
    sha256, snapshot symlinks, refs/main; returns the snapshot folder."""
    base = root / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (base / "blobs").mkdir(exist_ok=True)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / "main").write_text(commit)
    for name, src in files.items():
        blob = base / "blobs" / file_sha256(src)
        shutil.copyfile(src, blob)
        link = snap / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snap


@dataclass
class FakeHome:
    """Where each store's tiny model went."""

    home: Path
    folder_model: Path
    lmstudio_model: Path
    ollama_manifest: Path
    hf_snapshot: Path


def fake_home(home: Path, tiny: Path) -> FakeHome:
    """A home with a model in ~/models, LM Studio's folder, Ollama's store and the hub cache."""
    models = home / "models"
    models.mkdir(parents=True)
    folder_model = models / "tiny-folder-Q8_0.gguf"
    shutil.copyfile(tiny, folder_model)
    lms = home / ".lmstudio" / "models" / "lmstudio-community" / "Tiny-GGUF"
    lms.mkdir(parents=True)
    lms_model = lms / "tiny-lms-Q4_K_M.gguf"
    shutil.copyfile(tiny, lms_model)
    manifest = ollama_store(
        home / ".ollama" / "models",
        "tinyllama",
        "1b",
        tiny,
        params={"num_ctx": 2048, "temperature": 0.5, "stop": ["x"]},
    )
    snap = hf_cache(
        home / ".cache" / "huggingface" / "hub", "someone/Tiny-GGUF", {"tiny-Q4_K_M.gguf": tiny}
    )
    return FakeHome(home, folder_model, lms_model, manifest, snap)


@contextmanager
def library_daemon(library: str, env: dict[str, str] | None = None) -> Iterator[tuple[Llamad, str]]:
    """A running daemon with a gateway, no instances, and `library` (the `[library]`
    tables' lines); yields it and the gateway's URL, and stops it cleanly after."""
    d = short_dir()
    port = free_port()
    cfg = d / "llamad.toml"
    cfg.write_text(
        f'[daemon]\nstate_dir = "{d}/state"\n[supervise]\nhealth_interval = 0.5\n'
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n{library}'
    )
    with Llamad(cfg, env) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        yield ld, f"http://127.0.0.1:{port}"
        assert ld.stop() == 0


def post_json(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body` to `base` + `path`; the JSON answer, which must be a 200."""
    reply = httpx.post(f"{base}{path}", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    doc: dict[str, Any] = reply.json()
    return doc


def cut_at(text: str, stops: list[str]) -> str:
    """`text` up to the first of `stops`, as llama-server cuts an answer."""
    at = min((i for s in stops if (i := text.find(s)) >= 0), default=len(text))
    return text[:at]
