"""Directories and sockets other users could tamper with are refused (issue #16, items 5, 14).

The tests run as root here, so "another user" is uid 65534 (nobody) made the owner with
chown, and "writable by others" is a mode bit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers import Llamad, free_port, write_config
from remote_helpers import scratch_dir

from llamad.supervise.orphans import FILE_NAME

NOBODY = 65534


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch_dir() as path:
        yield path


def run_llamad(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(config), "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=30,
    )


def one_instance(base: Path, model: Path, **daemon: object) -> Path:
    return write_config(
        base / "llamad.toml",
        {"a": {"model": model, "port": free_port(), "autostart": False}},
        daemon={"state_dir": base / "state", **daemon},
    )


def test_world_writable_state_dir_is_refused(base: Path, tiny_model: Path) -> None:
    """A state dir others can write: exit 2, one line naming the path and the fix."""
    state = base / "state"
    state.mkdir()
    state.chmod(0o777)
    run = run_llamad(one_instance(base, tiny_model))
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        f"llamad: {state} can be written by other users (mode 0777); run: chmod 700 {state}"
    ]


def test_socket_dir_owned_by_another_user_is_refused(base: Path, tiny_model: Path) -> None:
    """A socket directory someone else owns: exit 2, one line."""
    sockdir = base / "sock"
    sockdir.mkdir(mode=0o700)
    os.chown(sockdir, NOBODY, NOBODY)
    run = run_llamad(one_instance(base, tiny_model, socket=sockdir / "llamad.sock"))
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert f"{sockdir} belongs to uid {NOBODY}" in run.stderr


def test_children_json_planted_by_another_user_is_ignored(base: Path, tiny_model: Path) -> None:
    """A children.json we did not write names a live process group: it is not killed."""
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        state = base / "state"
        state.mkdir(mode=0o700)
        planted = state / FILE_NAME
        created = psutil.Process(victim.pid).create_time()
        planted.write_text(f'[{{"pid": {victim.pid}, "instance": "x", "create_time": {created}}}]')
        os.chown(planted, NOBODY, NOBODY)
        with Llamad(one_instance(base, tiny_model)) as d:
            d.wait_ready()
            d.wait_event("orphans.untrusted_state")
            assert victim.poll() is None
            assert d.stop() == 0
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(5)


def test_llamactl_refuses_a_socket_owned_by_another_user(base: Path) -> None:
    """llamactl checks the socket's owner before talking (an impostor could answer)."""
    path = base / "llamad.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        os.chown(path, NOBODY, NOBODY)
        run = subprocess.run(
            [sys.executable, "-m", "llamad.cli.main", "--socket", str(path), "status"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert run.returncode == 4, run.stderr
    assert f"belongs to uid {NOBODY}" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_file_or_symlink_at_socket_path_is_one_line(
    base: Path, tiny_model: Path, kind: str
) -> None:
    """Something that is not a socket at the socket path: exit 1, one line, no traceback."""
    sock = base / "state" / "llamad.sock"
    sock.parent.mkdir(mode=0o700)
    if kind == "file":
        sock.write_text("not a socket")
    else:
        sock.symlink_to(base / "elsewhere")
    run = run_llamad(one_instance(base, tiny_model))
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert "daemon.socket_unusable" in run.stderr
