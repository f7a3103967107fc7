"""Whether a process still serves: it lives and takes connections, whatever the
supervisor has seen of it so far."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers import free_port
from inprocess import config, supervising

from llamad.lifecycle.states import State
from llamad.supervise.liveness import lives, serves


def _until_dead(pid: int, timeout: float = 10.0) -> None:
    """Block, loop and all, until `pid` is dead or a zombie: a loop too busy to see it."""
    deadline = time.monotonic() + timeout
    while lives(pid):
        assert time.monotonic() < deadline, f"process {pid} still lives"
        time.sleep(0.01)


def _killed() -> subprocess.Popen[bytes]:
    """A child killed and not reaped: a zombie until `wait()`."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child.send_signal(signal.SIGKILL)
    _until_dead(child.pid)
    return child


async def test_a_live_process_that_takes_connections_serves() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        assert await serves(os.getpid(), "127.0.0.1", port)


async def test_a_live_process_whose_port_refuses_does_not_serve() -> None:
    assert not await serves(os.getpid(), "127.0.0.1", free_port())


async def test_a_zombie_and_a_reaped_process_do_not_serve() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        child = _killed()
        try:
            assert not await serves(child.pid, "127.0.0.1", port)
        finally:
            child.wait()
        assert not await serves(child.pid, "127.0.0.1", port)


async def test_a_killed_server_stops_serving_before_the_supervisor_sees_it_exit(
    tmp_path: Path, tiny_model: Path
) -> None:
    cfg = config(tmp_path, {"a": {"model": tiny_model, "port": free_port()}})
    async with supervising(cfg) as sup:
        pid = (await sup.state("a", State.RUNNING)).record.pid
        assert pid is not None
        assert await sup.supervisor.still_serves("a", pid)
        os.kill(pid, signal.SIGKILL)
        _until_dead(pid)
        facts = sup.supervisor.facts("a")
        assert facts is not None
        assert (facts.state, facts.pid) == (State.RUNNING, pid), "the exit was seen already"
        assert not await sup.supervisor.still_serves("a", pid)
        assert not await sup.supervisor.still_serves("a", pid + 1)  # not its process
