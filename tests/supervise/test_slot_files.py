"""The prompt cache's files: sidecars, least recently used first out, and clearing."""

from __future__ import annotations

import os
from pathlib import Path

from llamad.supervise import slot_files as files


def _save(root: Path, instance: str, slot: int, size: int, used: float) -> None:
    directory = root / instance
    directory.mkdir(parents=True, exist_ok=True)
    (directory / files.data_name(slot)).write_bytes(b"x" * size)
    files.record(directory, slot, {"n_ctx": 512}, tokens=size // 10, size=size)
    os.utime(files.sidecar(directory, slot), (used, used))


def test_the_least_recently_used_go_first(tmp_path: Path) -> None:
    """Over `cache_max`, the oldest use goes first, until the rest fits."""
    _save(tmp_path, "a", 0, 400, used=1000)
    _save(tmp_path, "b", 0, 400, used=3000)
    _save(tmp_path, "a", 1, 400, used=2000)
    gone = files.prune(tmp_path, configured=900)
    assert [(g.instance, g.slot) for g in gone] == [("a", 0)]
    assert sorted((s.instance, s.slot) for s in files.everything(tmp_path)) == [("a", 1), ("b", 0)]


def test_a_file_without_its_sidecar_is_removed(tmp_path: Path) -> None:
    """A save cut short (no sidecar) is never offered for a restore."""
    _save(tmp_path, "a", 0, 10, used=1000)
    (tmp_path / "a" / files.data_name(3)).write_bytes(b"half")
    assert [s.slot for s in files.saved(tmp_path / "a")] == [0]
    assert not (tmp_path / "a" / files.data_name(3)).exists()


def test_clear_one_model_or_all(tmp_path: Path) -> None:
    """`llamactl cache clear NAME` leaves the other models' files; a library model's `/`
    is escaped in its directory's name and shown as is."""
    _save(tmp_path, "a", 0, 10, used=1000)
    _save(tmp_path, "user%2Frepo", 0, 10, used=1000)
    assert {s.instance for s in files.everything(tmp_path)} == {"a", "user/repo"}
    assert [g.instance for g in files.clear(tmp_path, "user/repo")] == ["user/repo"]
    assert [g.instance for g in files.clear(tmp_path)] == ["a"]
    assert files.everything(tmp_path) == []


def test_the_default_bound_is_a_tenth_of_the_free_space_at_most_10_gib(tmp_path: Path) -> None:
    assert files.limit(tmp_path, 123, held=0) == 123
    assert 0 < files.limit(tmp_path, None, held=0) <= 10 * files.GIB


def test_a_file_that_cannot_be_removed_is_left_and_nothing_fails(tmp_path: Path) -> None:
    """A cache on a disk that refuses to delete (read-only, or, here, a directory where a
    slot's file should be: unlink fails as it would there) lists, prunes and clears
    what it can, and never raises into `llamactl cache` or a stop."""
    _save(tmp_path, "a", 0, 400, used=1000)
    stuck = tmp_path / "a" / files.data_name(1)
    stuck.mkdir()
    (stuck / "inside").write_text("x")
    files.sidecar(tmp_path / "a", 1).write_text("not json")
    listed = files.everything(tmp_path)  # slot 1's sidecar is unreadable: removed, if it can
    assert [(s.instance, s.slot) for s in listed] == [("a", 0)]
    files.remove(tmp_path / "a", 1)
    assert stuck.is_dir()
    files.prune(tmp_path, configured=1)
    assert files.everything(tmp_path) == []
