"""Room on the disk for a save: the free space left once it is written, at the bytes per
token the instance's saves have shown."""

from __future__ import annotations

import shutil
from pathlib import Path

from llamad.supervise import slot_files as files
from llamad.supervise import slot_room as room


def test_a_save_bigger_than_the_free_space_is_refused(tmp_path: Path) -> None:
    """Enough free space now, not once the save is written: refused, not begun."""
    assert room.no_room(tmp_path) is None
    free = shutil.disk_usage(tmp_path).free
    why = room.no_room(tmp_path, need=free)
    assert why is not None
    assert why.startswith("disk full")


def test_the_need_is_the_tokens_at_the_saves_bytes_per_token(tmp_path: Path) -> None:
    assert room.need(tmp_path, [100]) == 0  # nothing saved yet: nothing to go by
    (tmp_path / files.data_name(0)).write_bytes(b"x" * 1000)
    files.record(tmp_path, 0, {}, tokens=10, size=1000)
    (tmp_path / files.data_name(1)).write_bytes(b"x" * 300)
    files.record(tmp_path, 1, {}, tokens=10, size=300)
    assert room.need(tmp_path, [100, 50]) == 100 * 150


def test_an_unusable_directory_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    why = room.no_room(blocker / "dir")
    assert why is not None
    assert why.startswith("cannot use")
