"""An instance's log file: rotated by size, never when it is not a regular file, and a
write that fails costs one warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import structlog

from llamad.supervise.childlog import ChildLog

pytestmark = pytest.mark.timeout(30)


def test_the_log_is_rotated_by_size_keeping_its_backups(tmp_path: Path) -> None:
    log = ChildLog(tmp_path / "a.log", 100, 2)
    for n in range(12):
        log.write(f"line {n:02d} " + "x" * 30)
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["a.log", "a.log.1", "a.log.2"]
    lines = [
        line
        for name in ("a.log.2", "a.log.1", "a.log")
        for line in (tmp_path / name).read_text().splitlines()
    ]
    assert [line[:7] for line in lines] == [f"line {n:02d}" for n in range(6, 12)]
    assert all((tmp_path / n).stat().st_size < 100 for n in names)


def test_a_log_that_is_not_a_regular_file_is_never_rotated(tmp_path: Path) -> None:
    """bpo-45401: rotating `/dev/null` (here through a link) would rename the link."""
    path = tmp_path / "a.log"
    path.symlink_to(os.devnull)
    log = ChildLog(path, 10, 2)
    for _ in range(5):
        log.write("x" * 40)
    log.close()
    assert path.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log"]


def test_a_log_truncated_by_another_writer_grows_from_its_new_end(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    log = ChildLog(path, 100, 1)
    log.write("x" * 60)
    os.truncate(path, 0)  # a copy-and-truncate logrotate
    log.write("y" * 30)
    log.close()
    assert not (tmp_path / "a.log.1").exists()


def test_a_failing_rotation_warns_once_and_the_log_recovers(tmp_path: Path) -> None:
    (tmp_path / "a.log.1").mkdir()  # in the way: every rotation fails
    log = ChildLog(tmp_path / "a.log", 50, 1)
    with structlog.testing.capture_logs() as seen:
        for _ in range(5):
            log.write("z" * 30)
        (tmp_path / "a.log.1").rmdir()
        log.write("after")  # the lines that failed are lost; this one fits
        log.write("w" * 30)  # and this one rotates
    log.close()
    assert [e["event"] for e in seen] == ["instance.log_unwritable"]
    assert (tmp_path / "a.log.1").read_text() == "z" * 30 + "\nafter\n"
    assert (tmp_path / "a.log").read_text() == "w" * 30 + "\n"
