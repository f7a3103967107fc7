"""The child's first steps: die with the daemon, even when the daemon died during fork."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from llamad.supervise.process import die_with_parent

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


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


def test_child_of_the_live_daemon_runs_on() -> None:
    """With the daemon as its parent, the child goes on to exec its program."""
    child = subprocess.run(
        ["sh", "-c", "exit 7"], preexec_fn=die_with_parent(os.getpid()), timeout=10
    )
    assert child.returncode == 7
