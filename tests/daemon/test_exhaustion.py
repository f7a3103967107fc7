"""Strangers and full disks do not take the daemon down (issue #16, items 1 and 4).

The daemon runs as a subprocess under a low RLIMIT_NOFILE (set in the child only, as
launchd's default soft limit of 256 would), loopback only, with bounded loops.
"""

from __future__ import annotations

import contextlib
import resource
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import Llamad, free_port, health, wait_for, write_config
from remote_helpers import ADMIN, scratch_dir, write_token

from llamad.client.http import Client

FAST = {
    "health_interval": 0.1,
    "health_timeout": 0.5,
    "unhealthy_after": 2,
    "start_timeout": 20.0,
    "stop_timeout": 3.0,
    "backoff_initial": 0.1,
    "backoff_max": 0.5,
}


def nofile(limit: int) -> Callable[[], None]:
    """A preexec_fn that gives the daemon (and what it spawns) `limit` descriptors, hard."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


@contextlib.contextmanager
def idle_connections(
    family: socket.AddressFamily, address: object, count: int
) -> Iterator[list[socket.socket]]:
    """Up to `count` connections that never send a byte (those refused are skipped)."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.settimeout(0.5)
            try:
                sock.connect(address)  # type: ignore[arg-type]
            except OSError:
                sock.close()
                continue
            held.append(sock)
        yield held
    finally:
        for sock in held:
            sock.close()


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the other end has closed `sock` (recv gives EOF or a reset)."""
    sock.settimeout(0.05)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch_dir() as path:
        yield path


def test_idle_connections_under_low_ulimit(base: Path, tiny_model: Path) -> None:
    """300 idle TCP and 100 idle Unix connections under a 128-descriptor limit: the
    instance is never killed, the daemon keeps answering, idle connections are closed,
    and stderr does not fill up with repeated lines."""
    remote_port, port = free_port(), free_port()
    remote = {
        "listen": f"127.0.0.1:{remote_port}",
        "token_file": write_token(base / "admin.token", ADMIN),
        "advertise": False,
    }
    cfg = write_config(
        base / "llamad.toml",
        {"a": {"model": tiny_model, "port": port}},
        daemon={"state_dir": base / "state", "remote": remote},
        supervise=FAST,
    )
    with Llamad(cfg, preexec_fn=nofile(128)) as d:
        d.wait_ready()
        d.wait_event("remote.listening", timeout=10)
        pid = d.wait_running("a", timeout=20)
        with (
            idle_connections(socket.AF_INET, ("127.0.0.1", remote_port), 300) as tcp,
            idle_connections(socket.AF_UNIX, str(d.socket), 100) as uds,
        ):
            assert tcp, "no TCP connection was accepted at all"
            # Idle connections are closed by the daemon after a short timeout.
            wait_for(lambda: all(closed_by_peer(s) for s in tcp[:20]), 15, "idle TCP closed")
            wait_for(lambda: all(closed_by_peer(s) for s in uds[:20]), 15, "idle UDS closed")
            # Meanwhile the instance went on being probed and was never killed.
            assert d.proc.poll() is None
            assert health(port) == 200
            # Once they are closed, the control socket answers again.
            doc = wait_for(lambda: _status(d.socket), 15, "status over the socket")
            assert doc["instances"][0]["pid"] == pid
        assert not d.events("instance.exited")
        assert d.running("a") == pid
        assert d.stop() == 0
    assert d.stderr_path.stat().st_size < 200_000
    assert "Traceback" not in d.stderr_path.read_text()


def _status(sock: Path) -> dict[str, object] | None:
    try:
        return dict(Client(sock).call("GET", "/v1/status"))
    except Exception:
        return None


def test_slow_header_connection_is_closed(base: Path, tiny_model: Path) -> None:
    """A client that sends half a request line and stalls is cut off."""
    cfg = write_config(
        base / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port(), "autostart": False}},
        daemon={"state_dir": base / "state"},
        supervise=FAST,
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(d.socket))
            sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n")
            wait_for(lambda: closed_by_peer(sock), 15, "slow-header connection closed")
        assert d.stop() == 0


def test_unwritable_log_dir_fails_the_instance_not_the_daemon(base: Path, tiny_model: Path) -> None:
    """A log file that cannot be opened is that instance's error; the others run."""
    logs = base / "logs"
    (logs / "b.log").mkdir(parents=True)  # a directory where the file should be
    a, b = free_port(), free_port()
    cfg = write_config(
        base / "llamad.toml",
        {"a": {"model": tiny_model, "port": a}, "b": {"model": tiny_model, "port": b}},
        daemon={"state_dir": base / "state", "log_dir": logs},
        supervise={**FAST, "max_restarts": 1},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("a", timeout=20)

        def b_failed() -> dict[str, object] | None:
            doc = d.instance("b")
            return doc if doc["state"] in ("backoff", "failed") else None

        doc = wait_for(b_failed, 15, "b failing")
        assert "log" in str(doc["error"]), doc
        assert d.proc.poll() is None
        assert health(a) == 200
        assert d.stop() == 0
    assert "Traceback" not in d.stderr_path.read_text()


def test_log_turning_unwritable_costs_one_warning(base: Path, tiny_model: Path) -> None:
    """Writes that start failing while a child runs give one warning, no traceback each."""
    logs = base / "logs"
    logs.mkdir()
    for n in (1, 2, 3):  # directories where backups go: every rotation now fails
        (logs / f"a.log.{n}").mkdir()
    cfg = write_config(
        base / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": base / "state", "log_dir": logs, "log_max_bytes": 100},
        supervise=FAST,
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        pid = d.wait_running("a", timeout=20)
        d.wait_event("instance.log_unwritable", instance="a")
        assert d.running("a") == pid
        assert d.stop() == 0
    assert len(d.events("instance.log_unwritable")) == 1, d.stderr_path.read_text()[-3000:]
    assert "Traceback" not in d.stderr_path.read_text()
