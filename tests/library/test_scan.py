"""The library's scan: every store's layout named as its program names it, split files
as one model, projectors attached, and bad input listed or warned about, never raised."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from library_helpers import fake_home, hf_cache, ollama_store, write_projector

from llamad.daemon.tinymodel import write_tiny_model
from llamad.library import ports
from llamad.library.model import LibraryModel
from llamad.library.names import file_model_name, quant_of, split_part, valid_name
from llamad.library.scan import Place, default_places, scan

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def home(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("HF_HUB_CACHE", str(home / ".cache" / "huggingface" / "hub"))
    fake_home(home, tiny_model)
    return home


def _by_name(places: list[Place], pull_dir: Path) -> dict[str, LibraryModel]:
    found = scan(places, pull_dir)
    return {m.name: m for m in found.models}


def test_every_store_named_as_its_program_names_it(home: Path) -> None:
    found = scan(default_places(home), home / "models")
    names = {m.name: m for m in found.models}
    assert set(names) == {
        "tiny-folder-Q8_0",
        "tiny-lms-Q4_K_M",
        "tinyllama:1b",
        "someone/Tiny-GGUF:Q4_K_M",
    }
    assert names["tiny-folder-Q8_0"].source == "folder"
    assert names["tiny-lms-Q4_K_M"].source == "lmstudio"
    hf = names["someone/Tiny-GGUF:Q4_K_M"]
    assert hf.source == "hf"
    assert hf.aliases == (
        "hf.co/someone/Tiny-GGUF:Q4_K_M",
        "hf.co/someone/Tiny-GGUF:q4_k_m",
        "someone/Tiny-GGUF:q4_k_m",
        # The repo's own name, as Ollama pulls Q4_K_M when no quant is named.
        "someone/Tiny-GGUF",
        "someone/Tiny-GGUF:latest",
        "hf.co/someone/Tiny-GGUF",
        "hf.co/someone/Tiny-GGUF:latest",
    )
    ollama = names["tinyllama:1b"]
    assert ollama.source == "ollama"
    assert ollama.path.name.startswith("sha256-")
    # Ollama's params as llama-server settings; `stop` has no server-wide setting: the
    # gateway adds it to each request. `{{ .Prompt }}` is of no chat family: noted.
    assert ollama.settings == {"ctx_size": 2048, "temp": 0.5}
    assert ollama.prompt is not None
    assert ollama.prompt.stop == ("x",)
    assert ollama.prompt.template == "{{ .Prompt }}"
    assert "Ollama template not recognised ('{{ .Prompt }}')" in (ollama.note or "")
    assert all(m.problem is None for m in found.models), found.models
    assert found.warnings == []


def test_ollama_latest_tag_and_user_namespace(tmp_path: Path, tiny_model: Path) -> None:
    store = tmp_path / "ollama"
    ollama_store(store, "plain", "latest", tiny_model)
    ollama_store(store, "mine", "q4", tiny_model, namespace="someone")
    names = _by_name([Place(store)], tmp_path / "pull")
    assert set(names) == {"plain", "someone/mine:q4"}


def test_ollama_projector_attached_and_engine_only_layers_refused(
    tmp_path: Path, tiny_model: Path
) -> None:
    store = tmp_path / "ollama"
    proj = write_projector(tmp_path / "proj.gguf")
    digest = __import__("hashlib").sha256(proj.read_bytes()).hexdigest()
    (store / "blobs").mkdir(parents=True)
    shutil.copyfile(proj, store / "blobs" / f"sha256-{digest}")
    layer = {"mediaType": "application/vnd.ollama.image.projector", "digest": f"sha256:{digest}"}
    ollama_store(store, "vision", "latest", tiny_model, extra=[layer])
    tensor = {"mediaType": "application/vnd.ollama.image.tensor", "digest": "sha256:" + "0" * 64}
    ollama_store(store, "newengine", "latest", tiny_model, extra=[tensor])
    names = _by_name([Place(store)], tmp_path / "pull")
    assert names["vision"].mmproj == store / "blobs" / f"sha256-{digest}"
    assert "application/vnd.ollama.image.tensor" in (names["newengine"].problem or "")


def test_split_files_are_one_model_and_projectors_attach(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    first = write_tiny_model(folder / "big-Q8_0.gguf", split=8)
    write_tiny_model(folder / "other-Q4_0.gguf")
    write_projector(folder / "mmproj-big-f16.gguf")
    names = _by_name([Place(folder)], tmp_path / "pull")
    assert set(names) == {"big-Q8_0", "other-Q4_0"}
    big = names["big-Q8_0"]
    assert big.path == first
    assert len(big.parts) == 3
    assert big.problem is None
    assert big.mmproj == folder / "mmproj-big-f16.gguf" == names["other-Q4_0"].mmproj
    first.with_name("big-Q8_0-00002-of-00003.gguf").unlink()
    assert "parts 2 of 3 missing" in (
        _by_name([Place(folder)], tmp_path / "p")["big-Q8_0"].problem or ""
    )


def test_corrupt_truncated_and_empty_files_are_listed_with_the_reason(
    tmp_path: Path, tiny_model: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "corrupt.gguf").write_bytes(b"GGUF" + os.urandom(200))
    (folder / "text.gguf").write_text("not a model at all")
    (folder / "empty.gguf").write_bytes(b"")
    data = tiny_model.read_bytes()
    (folder / "cut.gguf").write_bytes(data[: len(data) // 2])
    names = _by_name([Place(folder)], tmp_path / "pull")
    assert "not a loadable GGUF" in (names["corrupt"].problem or "")
    assert "no GGUF magic" in (names["text"].problem or "")
    assert names["empty"].problem == "empty file"
    assert (names["cut"].problem or "").startswith(
        f"incomplete: {len(data) // 2} of {len(data)} bytes"
    )


def test_hostile_names_loops_and_unreadable_folders_only_warn(
    tmp_path: Path, tiny_model: Path
) -> None:
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    shutil.copyfile(tiny_model, folder / "sub" / "ok.gguf")
    shutil.copyfile(tiny_model, folder / "we\nird $(rm -rf) ..name.gguf")
    shutil.copyfile(tiny_model, folder / "\x01\x02.gguf")
    shutil.copyfile(tiny_model, folder / "half.gguf.part")
    (folder / "loop").symlink_to(folder)
    (folder / "dangling.gguf").symlink_to(tmp_path / "nowhere")
    locked = folder / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        found = scan([Place(folder), Place(tmp_path / "missing")], tmp_path / "pull")
    finally:
        locked.chmod(0o700)
    assert {m.name for m in found.models} == {"ok", "we-ird-rm--rf-.name"}
    assert any("no usable model name" in w and "\\x01" in w for w in found.warnings)
    assert any("library folder not found" in w for w in found.warnings)
    if os.geteuid() != 0:  # root reads a 000 folder anyway
        assert any("locked" in w for w in found.warnings)


def test_names() -> None:
    assert quant_of("Qwen2.5-7B-Instruct-Q4_K_M") == "Q4_K_M"
    assert quant_of("llama-3.2-1b-instruct-q8_0") == "q8_0"
    assert quant_of("model-IQ3_XXS") == "IQ3_XXS"
    assert quant_of("model-bf16") == "bf16"
    assert quant_of("plain") is None
    assert split_part("m-Q4_K_M-00002-of-00003") == ("m-Q4_K_M", 2, 3)
    assert split_part("m-00004-of-00003") is None
    assert file_model_name("\x01\x02") is None
    assert not valid_name("../etc/passwd")
    assert not valid_name("/abs")
    assert valid_name("hf.co/u/r:Q4")


def test_ports_avoid_taken_held_and_keep_their_place() -> None:
    lo, hi = ports.DEFAULT_RANGE
    # Below the ephemeral ranges of Linux (32768-60999) and macOS (49152-65535).
    assert hi < 32768
    first, left = ports.assign(["a", "b"], set(), {}, (lo, hi), is_held=lambda p: False)
    assert not left
    assert len(set(first.values())) == 2
    again, _ = ports.assign(["a", "b"], set(), {}, (lo, hi), is_held=lambda p: False)
    assert again == first  # a name's place in the range is its own
    held = first["a"]
    moved, _ = ports.assign(["a"], set(), {}, (lo, hi), is_held=lambda p: p == held)
    assert moved["a"] != held
    kept, _ = ports.assign(["a"], set(), {"a": held}, (lo, hi), is_held=lambda p: True)
    assert kept == {"a": held}  # its own running process holds it
    full, left = ports.assign(["a", "b"], {lo}, {}, (lo, lo + 1), is_held=lambda p: False)
    assert list(full.values()) == [lo + 1]
    assert len(left) == 1
    with pytest.raises(ValueError, match="range like"):
        ports.parse_range("20000")


def test_hf_default_quant_and_quant_case(tmp_path: Path, tiny_model: Path) -> None:
    hub = tmp_path / "hub"
    hf_cache(hub, "u/Two", {"t-q4_k_m.gguf": tiny_model, "t-q8_0.gguf": tiny_model})
    hf_cache(hub, "u/One", {"o-Q8_0.gguf": tiny_model})
    names = _by_name([Place(hub)], tmp_path / "pull")
    two = names["u/Two:q4_k_m"]
    assert {"hf.co/u/Two", "u/Two:latest", "u/Two:Q4_K_M"} <= set(two.aliases)
    assert "hf.co/u/Two:Q8_0" in names["u/Two:q8_0"].aliases
    assert "u/Two" not in names["u/Two:q8_0"].aliases
    assert "hf.co/u/One" in names["u/One:Q8_0"].aliases  # a repo's only model
