"""One daemon at a time, no orphans, and sd_notify from the real daemon."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from helpers import Llamad, free_port, health, short_dir, wait_for, write_config

from llamad.supervise.orphans import MARKER_ENV, marker

FAST = {"health_interval": 0.2, "health_timeout": 0.5, "stop_timeout": 3.0, "backoff_initial": 0.1}


def listeners(port: int) -> list[int]:
    """Pids listening on `port` on this machine."""
    return [
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid
    ]


def make(tmp: Path, model: Path, ports: list[int], **daemon: object) -> Path:
    return write_config(
        tmp / "llamad.toml",
        {f"i{n}": {"model": model, "port": p} for n, p in enumerate(ports)},
        daemon={"state_dir": str(tmp / "state"), **daemon},
        supervise=FAST,
    )


def test_second_llamad_on_same_state_dir_exits_1(tmp_path: Path, tiny_model: Path) -> None:
    """A second llamad on the same state dir says 'already running (pid N)' and exits 1."""
    cfg = make(tmp_path, tiny_model, [free_port()])
    with Llamad(cfg) as first:
        first.wait_running("i0")
        second = subprocess.run(
            [sys.executable, "-m", "llamad", "--config", str(cfg)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 1
        assert second.stderr.strip() == f"llamad: already running (pid {first.proc.pid})"
        assert first.stop() == 0


def test_live_socket_elsewhere_exits_1_and_starts_nothing(tmp_path: Path, tiny_model: Path) -> None:
    """Another llamad answering on the socket (other state dir): exit 1, no child started."""
    sock_dir = short_dir()
    sock = sock_dir / "llamad.sock"
    port = free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = make(tmp_path / "a", tiny_model, [port], socket=str(sock))
    b = make(tmp_path / "b", tiny_model, [free_port()], socket=str(sock))
    with Llamad(a) as first:
        first.wait_running("i0")
        with Llamad(b) as second:
            assert second.proc.wait(30) == 1
            ev = second.events("daemon.socket_in_use")
            assert ev
            assert str(sock) in ev[0]["error"]
            assert not second.events("instance.state_changed")
        assert first.stop() == 0
    sock_dir.rmdir()


def test_sigkill_of_llamad_leaves_exactly_one_server_per_port(
    tmp_path: Path, tiny_model: Path
) -> None:
    """kill -9 of llamad, then a new llamad: exactly one llama-server per instance port."""
    ports = [free_port(), free_port()]
    cfg = make(tmp_path, tiny_model, ports)
    with Llamad(cfg) as d:
        old = [d.wait_running("i0"), d.wait_running("i1")]
        d.proc.kill()
        d.proc.wait(10)
    # PR_SET_PDEATHSIG takes the children down with the daemon.
    wait_for(lambda: not any(_alive(p) for p in old), 5, "children to die with llamad")
    with Llamad(cfg) as again:
        new = [again.wait_running("i0"), again.wait_running("i1")]
        for port, pid in zip(ports, new, strict=True):
            assert listeners(port) == [pid]
        assert again.stop() == 0


@contextlib.contextmanager
def server_on(
    llama_server: Path, model: Path, port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A llama-server llamad did not start, serving on `port`; killed on the way out."""
    proc = subprocess.Popen(
        [str(llama_server), "-m", str(model), "--port", str(port), "-c", "256", "-np", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    # Reap it as soon as it dies, as init would: a zombie left to this test looks alive
    # to the daemon's wait for its leftovers.
    threading.Thread(target=proc.wait, daemon=True).start()
    try:
        wait_for(lambda: health(port) == 200, 10, "the other server serving")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_leftover_children_in_state_file_are_reaped(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    """A child recorded in the state file (macOS: no PDEATHSIG) is killed before anything starts."""
    port = free_port()
    with server_on(llama_server, tiny_model, port) as orphan:
        state = tmp_path / "state"
        state.mkdir()
        created = psutil.Process(orphan.pid).create_time()
        (state / "children.json").write_text(
            json.dumps([{"pid": orphan.pid, "instance": "i0", "create_time": created}])
        )
        cfg = make(tmp_path, tiny_model, [port])
        with Llamad(cfg) as d:
            pid = d.wait_running("i0")
            assert orphan.wait(10) == -signal.SIGKILL
            assert listeners(port) == [pid]
            assert d.events("orphans.reaped", pid=orphan.pid)
            recorded = json.loads((state / "children.json").read_text())
            assert [e["pid"] for e in recorded] == [pid]
            assert d.stop() == 0


def test_marked_child_missing_from_state_file_is_reaped(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    """A child spawned just before llamad was SIGKILLed (not yet in children.json) carries
    the state dir's marker: the next llamad reaps it instead of reporting 'port in use'."""
    port = free_port()
    state = tmp_path / "state"
    with server_on(llama_server, tiny_model, port, {MARKER_ENV: marker(state)}) as stray:
        cfg = make(tmp_path, tiny_model, [port])
        with Llamad(cfg) as d:
            pid = d.wait_running("i0")
            assert stray.wait(10) == -signal.SIGKILL
            assert listeners(port) == [pid]
            assert d.events("orphans.reaped", pid=stray.pid)
            assert d.stop() == 0


def test_sigkill_right_after_a_respawn_then_restart_reaps(tmp_path: Path, tiny_model: Path) -> None:
    """kill -9 of llamad just after it respawned a child: the next llamad runs the
    instance on its port (the respawned child died or was reaped, never 'port in use')."""
    port = free_port()
    cfg = make(tmp_path, tiny_model, [port])
    with Llamad(cfg) as d:
        first = d.wait_running("i0")
        os.kill(first, signal.SIGKILL)
        d.wait_event("instance.state_changed", to="starting", instance="i0", count=2)
        d.proc.kill()
        d.proc.wait(10)
    with Llamad(cfg) as again:
        pid = again.wait_running("i0")
        assert listeners(port) == [pid]
        assert not again.events("instance.state_changed", to="failed")
        assert again.stop() == 0


def test_recycled_pid_in_state_file_is_left_alone(tmp_path: Path, tiny_model: Path) -> None:
    """A recorded pid whose create time differs is someone else's process: not killed."""
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        state = tmp_path / "state"
        state.mkdir()
        (state / "children.json").write_text(
            json.dumps([{"pid": bystander.pid, "instance": "i0", "create_time": 1.0}])
        )
        cfg = make(tmp_path, tiny_model, [free_port()])
        with Llamad(cfg) as d:
            d.wait_running("i0")
            assert bystander.poll() is None
            assert d.stop() == 0
    finally:
        bystander.kill()
        bystander.wait()


def test_sd_notify_ready_status_watchdog_stopping(tmp_path: Path, tiny_model: Path) -> None:
    """Under systemd: READY=1, STATUS= with counts, WATCHDOG=1 pings, STOPPING=1 with a
    STATUS= that says so."""
    where = short_dir()
    addr = where / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(addr))
        sock.settimeout(0.2)
        cfg = make(tmp_path, tiny_model, [free_port()])
        env = {"NOTIFY_SOCKET": str(addr), "WATCHDOG_USEC": "400000"}
        got: list[str] = []

        def receive() -> None:
            with contextlib.suppress(TimeoutError):
                got.append(sock.recv(4096).decode())

        with Llamad(cfg, env=env) as d:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not (
                "READY=1" in got and "STATUS=1 running" in got and got.count("WATCHDOG=1") >= 2
            ):
                receive()
            assert d.stop() == 0
        for _ in range(20):
            receive()
    addr.unlink()
    where.rmdir()
    assert "READY=1" in got
    assert "STATUS=1 running" in got
    assert got.count("WATCHDOG=1") >= 2
    assert "STOPPING=1\nSTATUS=stopping: 1 running" in got


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
