"""llamad.lock: one daemon per state directory, enforced with flock."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from llamad.daemon.lock import LOCK_NAME, AlreadyRunning, DaemonLock

REPO = Path(__file__).resolve().parents[2]

# Tries the lock once: prints "acquired" (holding it until stdin closes when asked to),
# or the AlreadyRunning message and exits 3.
ONE_LINER = """
import sys
from pathlib import Path
from llamad.daemon.lock import AlreadyRunning, DaemonLock
try:
    lock = DaemonLock().acquire(Path(sys.argv[1]))
except AlreadyRunning as exc:
    print(exc)
    sys.exit(3)
print("acquired", flush=True)
if sys.argv[2:] == ["hold"]:
    sys.stdin.read()
lock.release()
"""


def _python(*args: str) -> list[str]:
    return [sys.executable, "-c", ONE_LINER, *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _try_in_other_process(state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _python(str(state)), capture_output=True, text=True, env=_env(), timeout=30, check=False
    )


def test_acquire_creates_private_dir_and_writes_pid(tmp_path: Path) -> None:
    """The state dir is created 0700 and the lock file holds our pid."""
    state = tmp_path / "deep" / "state"
    with DaemonLock(state) as lock:
        assert lock.held
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert (state / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    assert not lock.held


def test_already_running_message() -> None:
    """The error reads 'already running (pid N)'."""
    assert str(AlreadyRunning(4242)) == "already running (pid 4242)"
    assert AlreadyRunning(4242).pid == 4242
    assert str(AlreadyRunning(None)) == "already running (pid unknown)"


def test_second_lock_in_same_process_fails(tmp_path: Path) -> None:
    """flock is per open file description, so a second DaemonLock here conflicts too."""
    first = DaemonLock().acquire(tmp_path)
    try:
        with pytest.raises(AlreadyRunning, match=rf"^already running \(pid {os.getpid()}\)$"):
            DaemonLock().acquire(tmp_path)
        # The failed attempt must not have clobbered the holder's pid.
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    finally:
        first.release()
    with DaemonLock(tmp_path):
        pass


def test_other_process_is_refused_then_succeeds_after_release(tmp_path: Path) -> None:
    """Another process gets 'already running (pid <ours>)'; after release it gets the lock."""
    lock = DaemonLock().acquire(tmp_path)
    try:
        refused = _try_in_other_process(tmp_path)
        assert refused.returncode == 3, refused.stderr
        assert refused.stdout.strip() == f"already running (pid {os.getpid()})"
    finally:
        lock.release()
    allowed = _try_in_other_process(tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "acquired"


def test_lock_held_by_other_process_names_its_pid(tmp_path: Path) -> None:
    """While a child holds the lock we are refused with the child's pid; once it exits we win."""
    child = subprocess.Popen(
        _python(str(tmp_path), "hold"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline().strip() == "acquired"
        with pytest.raises(AlreadyRunning) as caught:
            DaemonLock().acquire(tmp_path)
        assert caught.value.pid == child.pid
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    with DaemonLock(tmp_path):
        pass


def test_lock_descriptor_is_not_inherited(tmp_path: Path) -> None:
    """llama-server children must not inherit the lock and keep it after llamad dies."""
    with DaemonLock(tmp_path) as lock:
        fd = lock._fd
        assert fd is not None
        assert os.get_inheritable(fd) is False


def test_release_is_idempotent_and_acquire_needs_a_dir(tmp_path: Path) -> None:
    """release() twice is harmless; a lock with no directory is a programming error."""
    lock = DaemonLock(tmp_path).acquire()
    assert lock.acquire() is lock  # already held: a no-op
    lock.release()
    lock.release()
    with pytest.raises(ValueError, match="state directory"):
        DaemonLock().acquire()
