"""The daemon's log is events with fields, nothing in prose: stale socket, control server
start and stop, and a SIGKILLed instance at warning."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path

from helpers import Llamad, free_port, short_dir, write_config


def test_stable_events_for_socket_control_server_and_sigkill(
    tmp_path: Path, tiny_model: Path
) -> None:
    where = short_dir()
    sock_path = where / "llamad.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock_path))
    stale.close()  # the file stays, nobody listens: a crashed llamad's socket
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state"), "socket": str(sock_path)},
        supervise={"health_interval": 0.2, "backoff_initial": 0.1},
    )
    try:
        with Llamad(cfg) as d:
            d.wait_ready()
            pid = d.wait_running("a")
            os.kill(pid, signal.SIGKILL)
            d.wait_running("a", not_pid=pid)
            assert d.stop() == 0
            replaced = d.events("control.socket_replaced")
            assert [e["path"] for e in replaced] == [str(sock_path)]
            assert [e["socket"] for e in d.events("control.listening")] == [str(sock_path)]
            assert [e["socket"] for e in d.events("control.stopped")] == [str(sock_path)]
            killed = d.events("instance.exited", pid=pid)
            assert [(e["signal"], e["level"]) for e in killed] == [("SIGKILL", "warning")]
            events = [e["event"] for e in d.events()]
            assert all("." in name and " " not in name for name in events), events
    finally:
        shutil.rmtree(where)
