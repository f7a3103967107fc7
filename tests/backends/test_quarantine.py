"""A quarantined download (macOS's `com.apple.quarantine`) gets one line with its fix.

Linux cannot carry a `com.apple.*` attribute, so the flag is read by a stand-in reader
passed to `Quarantine`; the refusal is acted by executables that are killed with SIGKILL
before printing anything (Gatekeeper's way) or cannot be executed at all (EPERM/EACCES).
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from llamad.backends import quarantine
from llamad.backends.binaries import CatalogError
from llamad.backends.catalog_cache import run_flag
from llamad.backends.quarantine import ATTR, Quarantine, read_xattr
from llamad.backends.tool import ServerCommand

KILLED_AT_EXEC = "#!/bin/sh\nkill -9 $$\n"


def flagged(*paths: Path) -> Quarantine:
    """A Quarantine whose reader finds the flag on `paths` (by their real path)."""
    real = {Path(os.path.realpath(p)) for p in paths}
    return Quarantine(lambda path: b"0083;6712a1b2;Safari;" if path in real else None)


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_one_quarantined_executable_names_xattr_d(tmp_path: Path) -> None:
    binary = executable(tmp_path / "llama-b6000" / "llama-server", KILLED_AT_EXEC)
    assert flagged(binary).problem(binary) == (
        f"macOS will not run {binary}: it is quarantined (downloaded); "
        f"run: xattr -d {ATTR} {binary}"
    )
    assert flagged().problem(binary) is None


def test_a_quarantined_release_folder_names_xattr_dr(tmp_path: Path) -> None:
    """A release archive: the executable and the ggml libraries beside it all carry it."""
    folder = tmp_path / "llama-b6000"
    binary = executable(folder / "llama-server", KILLED_AT_EXEC)
    lib = folder / "libggml-base.dylib"
    lib.write_bytes(b"")
    assert flagged(binary, lib).problem(binary) == (
        f"macOS will not run {binary} and 1 more: it is quarantined (downloaded); "
        f"run: xattr -dr {ATTR} {folder}"
    )


def test_a_help_run_killed_at_exec_says_quarantined(tmp_path: Path) -> None:
    """What the daemon runs first (`--help` for the option catalogue) fails with the fix,
    not with 'exit -9'."""
    binary = executable(tmp_path / "bin" / "llama-server", KILLED_AT_EXEC)
    with pytest.raises(CatalogError, match=re.escape(f"run: xattr -d {ATTR} {binary}")):
        run_flag(ServerCommand(binary), "--help", quarantine=flagged(binary))
    # Without the flag the same death is reported as before, by the caller.
    assert run_flag(ServerCommand(binary), "--help", quarantine=flagged()).returncode == -9


def test_an_exec_refused_says_quarantined(tmp_path: Path) -> None:
    binary = tmp_path / "bin" / "llama-server"
    executable(binary, "#!/bin/sh\n").chmod(0o644)  # exec fails: EACCES here, EPERM on a Mac
    with pytest.raises(CatalogError, match="quarantined"):
        run_flag(ServerCommand(binary), "--help", quarantine=flagged(binary))
    with pytest.raises(CatalogError, match=r"^cannot run .*: Permission denied$"):
        run_flag(ServerCommand(binary), "--help", quarantine=flagged())


def test_output_before_a_sigkill_is_not_gatekeeper(tmp_path: Path) -> None:
    """An OOM kill of a running server is not a refusal, whatever flag the file keeps."""
    binary = executable(tmp_path / "llama-server", "#!/bin/sh\necho loading\nkill -9 $$\n")
    assert flagged(binary).refused_run(binary, "SIGKILL", ["loading"]) is None
    assert flagged(binary).refused_run(binary, "SIGKILL", [""]) is not None
    refused = OSError(errno.ENOENT, "No such file or directory")
    assert flagged(binary).refused_exec(binary, refused) is None


def test_read_xattr_reads_what_the_filesystem_keeps(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"")
    try:
        os.setxattr(path, "user.llamad-test", b"0083;x")
    except (OSError, AttributeError) as exc:
        pytest.skip(f"no user xattrs here: {exc}")
    assert read_xattr(path, "user.llamad-test") == b"0083;x"
    assert read_xattr(path, "user.other") is None
    assert read_xattr(path, ATTR) is None
    # macOS's path through libc: Linux's getxattr takes the first four of its arguments
    # in the same registers and ignores the last two, so the call itself is checked here.
    assert quarantine._darwin_getxattr(os.fsencode(path), b"user.llamad-test") == b"0083;x"
    assert quarantine._darwin_getxattr(os.fsencode(path), b"user.other") is None
