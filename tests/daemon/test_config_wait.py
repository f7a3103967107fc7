"""A bad config under launchd does not respawn forever: llamad waits for the file to change.

launchd restarts every non-zero exit (10 s apart, forever); the plist sets
LLAMAD_SERVICE=launchd, and llamad then stays up, idle, until the config is saved again
(exit 2: launchd starts it, it reads the new file) or it is stopped (exit 0: stays down).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamad.common.service_job import SERVICE_ENV, WAITING
from llamad.daemon.config_wait import wait_for_fix
from llamad.service.joblog import config_problem

pytestmark = pytest.mark.process

BAD = "[instances.qwen]\nport = 1\nctx_sise = 1\n"


@pytest.fixture
def bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    return path


@pytest.fixture
def waiting(bad_config: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """llamad as launchd starts it, its stderr in a file as launchd's StandardErrorPath,
    once it says it waits."""
    err_log = tmp_path / "llamad.err.log"
    env = {**os.environ, SERVICE_ENV: "launchd"}
    with err_log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llamad", "--config", str(bad_config)],
            stderr=err,
            stdout=subprocess.DEVNULL,
            env=env,
            text=True,
        )
    try:
        while WAITING not in err_log.read_text():
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
        yield proc, err_log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_it_stays_up_until_the_config_changes_then_exits_2(
    waiting: tuple[subprocess.Popen[str], Path], bad_config: Path
) -> None:
    proc, err_log = waiting
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2.5)  # three of launchd's polls: no exit, so no respawn
    text = err_log.read_text()
    assert "did you mean ctx_size?" in text
    assert "Traceback" not in text
    bad_config.write_text(BAD.replace("ctx_sise", "ctx_size"))
    assert proc.wait(timeout=10) == 2


def test_a_stop_while_waiting_exits_0(waiting: tuple[subprocess.Popen[str], Path]) -> None:
    """SIGTERM (a stop asked for): exit 0, which KeepAlive = {SuccessfulExit = false}
    leaves stopped."""
    proc, _ = waiting
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def test_the_log_tells_status_why(waiting: tuple[subprocess.Popen[str], Path]) -> None:
    """What `llamactl service status` reads from the job's stderr log."""
    _, err_log = waiting
    problem = config_problem(err_log)
    assert problem is not None
    assert problem.waiting
    assert "did you mean ctx_size?" in problem.line


def test_without_launchd_it_exits_2_at_once(bad_config: Path) -> None:
    """From a terminal or under systemd (RestartPreventExitStatus=2): no wait."""
    env = {k: v for k, v in os.environ.items() if k != SERVICE_ENV}
    run = subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(bad_config)],
        capture_output=True,
        env=env,
        timeout=30,
    )
    assert run.returncode == 2
    assert WAITING.encode() not in run.stderr


def test_the_wait_ends_on_its_own_to_retry_what_a_save_cannot_show(tmp_path: Path) -> None:
    """A llama-server installed or a quarantine flag cleared changes no config: the wait
    still ends (launchd then starts llamad again), once per retry period."""
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    began = time.monotonic()
    assert wait_for_fix(path, poll_s=0.05, retry_s=0.5) is True
    assert time.monotonic() - began >= 0.5
