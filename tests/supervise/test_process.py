"""supervise.process: what runs in a child between fork and exec."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

from llamad.supervise.process import Child

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
    child = await Child.spawn([sys.executable, "-c", ASK_PDEATHSIG], dict(os.environ), lines.append)
    monkeypatch.undo()  # the child's own ctypes is its own business
    exit_info = await child.wait()
    assert exit_info.code == 0, lines
    assert lines == ["9"]  # SIGKILL
