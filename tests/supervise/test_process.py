"""supervise.process: what runs in a child between fork and exec."""

from __future__ import annotations

import asyncio
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llamad.supervise.childlog import ChildLog
from llamad.supervise.process import Child, die_with_parent

# The child asks the kernel for its own parent-death signal (PR_GET_PDEATHSIG = 2).
ASK_PDEATHSIG = (
    "import ctypes; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v)); print(v.value)"
)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
async def test_child_gets_pdeathsig_without_loading_libc_after_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """prctl is resolved at import: a spawn runs no ctypes.CDLL (a dlopen) in the fork."""

    def no_dlopen(*args: object, **kwargs: object) -> None:
        raise AssertionError("ctypes.CDLL called while spawning")

    monkeypatch.setattr(ctypes, "CDLL", no_dlopen)
    lines: list[str] = []

    def write(text: str) -> str:
        lines.append(text)
        return text

    child = await Child.spawn([sys.executable, "-c", ASK_PDEATHSIG], dict(os.environ), write)
    monkeypatch.undo()  # the child's own ctypes is its own business
    exit_info = await child.wait()
    assert exit_info.code == 0, lines
    assert lines == ["9"]  # SIGKILL


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_child_whose_parent_is_not_the_daemon_exits_at_once() -> None:
    """The fork->prctl race: a daemon gone before prctl means a parent other than it."""
    not_the_daemon = os.getpid() + 1_000_000
    child = subprocess.Popen(["sleep", "30"], preexec_fn=die_with_parent(not_the_daemon))
    try:
        assert child.wait(10) == 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_child_of_the_live_daemon_runs_on() -> None:
    """With the daemon as its parent, the child goes on to exec its program."""
    child = subprocess.run(
        ["sh", "-c", "exit 7"], preexec_fn=die_with_parent(os.getpid()), timeout=10
    )
    assert child.returncode == 7


async def test_child_output_is_redacted_once_in_the_log_and_the_tail(tmp_path: Path) -> None:
    """A secret inside "[redacted]" shows whether it was blanked out twice."""
    log = ChildLog(tmp_path / "a.log", 1 << 20, 1, secrets=["act"])
    child = await Child.spawn([sys.executable, "-c", "print('key=act')"], {}, log.write)
    exit_info = await asyncio.wait_for(child.wait(), 10)
    log.close()
    assert exit_info.stderr_tail == ["key=[redacted]"]
    assert (tmp_path / "a.log").read_text().splitlines() == ["key=[redacted]"]
