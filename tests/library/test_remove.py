"""Removing a pulled model: only what llamad pulled goes (its Ollama store's manifest and
the blobs no other manifest uses, the Hugging Face files its record names); every other
program's file, a person's own download and a file the config names are refused with
where the file lives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from library_helpers import hf_cache, ollama_store, write_projector

from llamad.library.listing import Library
from llamad.library.pulled import pulled_files, remember
from llamad.library.remove import NoSuchModel, RemoveError, delete, plan
from llamad.library.scan import OLLAMA_PULLS, Place, scan

pytestmark = pytest.mark.timeout(30)


def _library(places: list[Path], pull_dir: Path, served: dict[str, str] | None = None) -> Library:
    found = scan([Place(p) for p in places], pull_dir, pulled_files(pull_dir))
    assert found.warnings == []
    return Library(tuple(places), pull_dir, "", tuple(found.models), served or {})


def test_other_programs_files_are_refused_naming_where_they_live(
    tmp_path: Path, tiny_model: Path
) -> None:
    folder, lms = tmp_path / "models", tmp_path / ".lmstudio" / "models"
    for d in (folder, lms / "pub" / "repo"):
        d.mkdir(parents=True)
    shutil.copyfile(tiny_model, folder / "mine-Q4_0.gguf")
    shutil.copyfile(tiny_model, lms / "pub" / "repo" / "lms-Q8_0.gguf")
    ollama_store(tmp_path / "ollama", "theirs", "1b", tiny_model)
    hub = tmp_path / "hub"
    hf_cache(hub, "someone/Tiny-GGUF", {"tiny-Q4_K_M.gguf": tiny_model})
    lib = _library([folder, lms, tmp_path / "ollama", hub], tmp_path / "pull")
    refusals = {
        "mine-Q4_0": f"{folder / 'mine-Q4_0.gguf'} is in a folder of yours",
        "lms-Q8_0": "is in LM Studio's models folder",
        "theirs:1b": "is in Ollama's store (remove it with `ollama rm`)",
        "hf.co/someone/Tiny-GGUF:Q4_K_M": "is in the Hugging Face cache",
    }
    for name, where in refusals.items():
        with pytest.raises(RemoveError, match="not pulled by llamad") as refused:
            plan(lib, name)
        assert where in str(refused.value)
        assert refused.value.status == 409
    with pytest.raises(NoSuchModel):
        plan(lib, "nothere")
    served = _library([folder], tmp_path / "pull", {"mine-Q4_0": "chat"})
    with pytest.raises(RemoveError, match=r"instances\.chat in the config file serves"):
        plan(served, "mine-Q4_0")
    assert all(p.exists() for p in (folder / "mine-Q4_0.gguf", tmp_path / "ollama" / "blobs"))


def test_an_ollama_pull_goes_with_the_blobs_only_it_uses(tmp_path: Path, tiny_model: Path) -> None:
    pull_dir = tmp_path / "pull"
    store = pull_dir / OLLAMA_PULLS
    gone = ollama_store(store, "first", "1b", tiny_model, params={"num_ctx": 512})
    kept = ollama_store(store, "second", "latest", tiny_model)  # the same model blob
    lib = _library([], pull_dir)
    p = plan(lib, "first:1b")
    assert p.files[0] == gone
    blobs = {f.name for f in p.files[1:]}
    assert len(blobs) == 1  # only the params blob; the GGUF and template are shared
    assert delete(p, pull_dir) > 0
    assert not gone.exists()
    assert not gone.parent.exists()  # its empty folder pruned too
    after = _library([], pull_dir)
    assert [m.name for m in after.models] == ["second"]
    assert after.models[0].problem is None
    assert kept.exists()


def test_a_hf_pull_goes_but_a_persons_own_quant_and_shared_projector_stay(
    tmp_path: Path, tiny_model: Path
) -> None:
    pull_dir, hub = tmp_path / "pull", tmp_path / "hub"
    proj = write_projector(tmp_path / "proj.gguf")
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_model.read_bytes() + b"")  # the same bytes: one shared blob
    files = {"t-Q4_K_M.gguf": tiny_model, "t-Q8_0.gguf": other, "mmproj-f16.gguf": proj}
    snap = hf_cache(hub, "someone/T-GGUF", files)
    remember(pull_dir, "someone/T-GGUF", ["t-Q4_K_M.gguf", "mmproj-f16.gguf"])
    lib = _library([hub], pull_dir)
    sources = {m.name: m.source for m in lib.models}
    assert sources == {"someone/T-GGUF:Q4_K_M": "pulled:hf", "someone/T-GGUF:Q8_0": "hf"}
    with pytest.raises(RemoveError, match="downloaded by someone else"):
        plan(lib, "someone/T-GGUF:Q8_0")
    p = plan(lib, "hf.co/someone/t-gguf:q4_k_m")  # any spelling the library answers to
    # The projector serves the person's Q8_0 too; the blob is shared with it: both stay.
    assert p.files == (snap / "t-Q4_K_M.gguf",)
    delete(p, pull_dir)
    assert not (snap / "t-Q4_K_M.gguf").is_symlink()
    assert (snap / "t-Q8_0.gguf").read_bytes() == tiny_model.read_bytes()
    assert (snap / "mmproj-f16.gguf").exists()
    assert pulled_files(pull_dir) == {"someone/T-GGUF": frozenset({"mmproj-f16.gguf"})}
    assert [m.name for m in _library([hub], pull_dir).models] == ["someone/T-GGUF:Q8_0"]
