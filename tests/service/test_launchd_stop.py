"""`llamactl service restart` and a reinstall stop the job gracefully and wait for it.

The job is a real process that takes a moment to stop on SIGTERM, as llamad does while it
saves slots. The stand-in `launchctl` knows that process: `print` reports it running (its
pid) while it lives, `kill SIGTERM` and `bootout` send it SIGTERM, and every call is
recorded with the time it was made, so a test can show the start came after the exit.
"""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stand_ins import service_llamactl

from llamad.service import launchctl

LABEL = "dev.llamad.daemon"
GUI = f"gui/{os.getuid()}"
TARGET = f"{GUI}/{LABEL}"
PYTHON = sys.executable  # the fixture moves sys.executable next to the stand-ins
STOP_S = 1.0  # how long the job takes to stop after SIGTERM

LAUNCHCTL = """#!{python}
import json, os, signal, sys, time
state = os.environ["JOB_STATE"]
argv = sys.argv[1:]
with open(os.path.join(state, "calls.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": argv, "at": time.time()}}) + "\\n")
pid = int(open(os.path.join(state, "pid")).read())
loaded = os.path.exists(os.path.join(state, "loaded"))
def alive():
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
if argv[0] == "print":
    if not loaded:
        sys.stderr.write("Could not find service")
        sys.exit(113)
    body = "\\tstate = running\\n\\tpid = %d\\n" % pid if alive() else "\\tstate = not running\\n"
    sys.stdout.write(argv[1] + " = {{\\n" + body + "}}\\n")
elif argv[:2] == ["kill", "SIGTERM"] or argv[0] == "bootout":
    if argv[0] == "bootout":
        os.remove(os.path.join(state, "loaded"))
    if alive():
        os.kill(pid, signal.SIGTERM)
"""

JOB = """
import signal, sys, time
def stop(*_):
    time.sleep({stop_s})
    sys.exit(0)
signal.signal(signal.SIGTERM, stop if {graceful} else signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


class Job:
    """The job's process, reaped the moment it exits (launchd would), and when that was."""

    def __init__(self, state: Path, graceful: bool = True) -> None:
        script = JOB.format(stop_s=STOP_S, graceful=graceful)
        self.proc = subprocess.Popen([PYTHON, "-c", script], stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"ready\n"
        (state / "pid").write_text(str(self.proc.pid))
        (state / "loaded").touch()
        self.exited_at: float | None = None
        self._reaper = threading.Thread(target=self._reap)
        self._reaper.start()

    def _reap(self) -> None:
        self.proc.wait()
        self.exited_at = time.time()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._reaper.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home, state, bin_dir = tmp_path / "home", tmp_path / "state", tmp_path / "bin"
    for folder in (home, state, bin_dir):
        folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JOB_STATE", str(state))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    tool = bin_dir / "launchctl"
    tool.write_text(LAUNCHCTL.format(python=PYTHON))
    tool.chmod(0o755)
    (bin_dir / "llamad").write_text("#!/bin/sh\n")
    (bin_dir / "llamad").chmod(0o755)
    monkeypatch.setattr(launchctl, "RETRY_EVERY_S", 0.05)
    monkeypatch.setattr(launchctl, "KILL_SLACK_S", 0.5)
    return state


@pytest.fixture
def job(state: Path) -> Iterator[Job]:
    job = Job(state)
    yield job
    job.close()


def installed_plist(exit_timeout: int) -> Path:
    """The plist a running job was loaded from: its ExitTimeOut bounds the wait."""
    path = Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plistlib.dumps({"Label": LABEL, "ExitTimeOut": exit_timeout}))
    return path


def calls(state: Path) -> list[tuple[list[str], float]]:
    lines = (state / "calls.jsonl").read_text().splitlines()
    return [(c["argv"], c["at"]) for c in map(json.loads, lines)]


def test_restart_sends_sigterm_waits_for_the_exit_then_kickstarts(state: Path, job: Job) -> None:
    """Not `kickstart -k` (SIGKILL): SIGTERM, the job's own clean exit, then a start."""
    installed_plist(exit_timeout=30)
    assert service_llamactl("launchd", "restart") == 0
    made = calls(state)
    argvs = [argv for argv, _ in made]
    assert argvs[:2] == [["print", TARGET], ["kill", "SIGTERM", TARGET]]
    assert argvs[-1] == ["kickstart", TARGET]
    assert set(map(tuple, argvs[2:-1])) == {("print", TARGET)}  # polled until it exited
    assert job.proc.returncode == 0  # its own exit, not a SIGKILL
    assert job.exited_at is not None
    assert made[-1][1] >= job.exited_at
    assert made[-1][1] - made[1][1] >= STOP_S


def test_restart_gives_up_after_exit_timeout(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job still running ExitTimeOut (and a little) after SIGTERM: say so, start nothing."""
    job = Job(state, graceful=False)
    try:
        installed_plist(exit_timeout=1)
        began = time.monotonic()
        assert service_llamactl("launchd", "restart") == 1
        assert time.monotonic() - began >= 1.0
        err = capsys.readouterr().err
        assert f"{TARGET} (pid {job.proc.pid}) still runs 1 s after SIGTERM" in err
        assert "kickstart" not in [argv[0] for argv, _ in calls(state)]
    finally:
        job.close()


def test_reinstall_waits_for_the_exit_after_bootout(state: Path, job: Job, tmp_path: Path) -> None:
    """bootout returns (and print forgets the job) before its process has stopped; the new
    job is bootstrapped only after the old process exited."""
    installed_plist(exit_timeout=30)
    config = tmp_path / "llamad.toml"
    config.write_text("")
    assert service_llamactl("launchd", "install", "--config", str(config)) == 0
    made = calls(state)
    argvs = [argv[0] for argv, _ in made]
    assert argvs[:2] == ["print", "bootout"]
    assert argvs[-2:] == ["enable", "bootstrap"]
    assert job.proc.returncode == 0
    assert job.exited_at is not None
    assert made[-2][1] >= job.exited_at
