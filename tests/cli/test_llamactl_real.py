"""llamactl against a real daemon running the real llama-server."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from helpers import Llamad, free_port, wait_for, write_config

STATUS_KEYS = {
    "name", "state", "pid", "host", "port", "model", "restarts", "uptime_s", "health",
    "last_exit", "error", "rss_bytes", "cpu_percent", "prompt_cache", "chat_template",
}  # fmt: skip
DAEMON_KEYS = {
    "pid", "version", "config_path", "config_error", "started_at", "uptime_s",
    "llama_server", "llama_server_version", "backends", "draining", "listeners",
    "keep_awake",
}  # fmt: skip


def test_status_start_stop_logs_and_failed(tmp_path: Path, tiny_model: Path) -> None:
    """Table, JSON document, exit codes 0/3, stop, start clearing failed, logs; socket perms."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"broken" * 100)
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "good": {"model": tiny_model, "port": free_port()},
            "flaky": {"model": model, "port": free_port(), "watch_model": False},
        },
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={"health_interval": 0.2, "max_restarts": 0, "backoff_initial": 0.1},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("good")
        wait_for(lambda: d.instance("flaky")["state"] == "failed", 15, "flaky failed")
        assert stat.S_IMODE(d.socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(d.socket.parent.stat().st_mode) == 0o700

        table = d.ctl("status")
        assert table.returncode == 3
        header = table.stdout.splitlines()[0].split()
        assert header == [
            "NAME",
            "STATE",
            "PID",
            "PORT",
            "MODEL",
            "UPTIME",
            "RESTARTS",
            "HEALTH",
            "RSS",
        ]
        assert "failed" in table.stdout
        assert d.ctl("status", "good").returncode == 0

        doc = json.loads(d.ctl("status", "--json").stdout)
        assert set(doc) == {"daemon", "instances"}
        assert set(doc["daemon"]) == DAEMON_KEYS
        llama = doc["daemon"]["backends"]["llama-server"]
        assert llama == {
            "path": doc["daemon"]["llama_server"],
            "command": doc["daemon"]["llama_server"],  # llama-server itself: no command words
            "version": doc["daemon"]["llama_server_version"],
        }
        assert all(set(i) == STATUS_KEYS for i in doc["instances"])
        flaky = next(i for i in doc["instances"] if i["name"] == "flaky")
        assert flaky["last_exit"]["code"] == 1
        assert flaky["last_exit"]["stderr_tail"]
        assert flaky["error"]

        shutil.copy(tiny_model, model)
        started = d.ctl("start", "flaky")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "flaky: running" in started.stdout
        assert d.ctl("status").returncode == 0

        stopped = d.ctl("stop", "good")
        assert stopped.returncode == 0
        assert d.instance("good")["state"] == "stopped"
        # No process, no health: the last probe's "ok" would read as current.
        assert d.instance("good")["health"] is None
        table = d.ctl("status")
        assert table.returncode == 3
        row = next(ln.split() for ln in table.stdout.splitlines() if ln.startswith("good"))
        assert row[1] == "stopped"
        assert "ok" not in row

        logs = d.ctl("logs", "flaky", "-n", "5")
        assert logs.returncode == 0
        assert len(logs.stdout.splitlines()) == 5
        assert d.ctl("start", "--all").returncode == 0
        assert d.stop() == 0
    down = subprocess.run(
        [sys.executable, "-m", "llamad.cli.main", "--socket", str(d.socket), "status"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert down.returncode == 4
    assert str(d.socket) in down.stderr


def test_commands_wait_on_the_server(tmp_path: Path, tiny_model: Path) -> None:
    """`?wait=S` answers with the outcome: running, stopped, a new pid, or failed."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"broken" * 100)
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "good": {"model": tiny_model, "port": free_port(), "autostart": False},
            "bad": {"model": broken, "port": free_port(), "autostart": False},
        },
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={"health_interval": 0.2, "max_restarts": 0, "backoff_initial": 0.1},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        doc = d.api("POST", "/v1/instances/good/start?wait=30", timeout=40)
        assert (doc["state"], doc["health"]["ok"]) == ("running", True)
        again = d.api("POST", "/v1/instances/good/restart?wait=30", timeout=40)
        assert again["state"] == "running"
        assert again["pid"] not in (None, doc["pid"])
        assert d.api("POST", "/v1/instances/good/stop?wait=30", timeout=40)["state"] == "stopped"
        failed = d.api("POST", "/v1/instances/bad/start?wait=30", timeout=40)
        assert failed["state"] == "failed"
        assert failed["error"]

        started = d.ctl("start", "good", "bad")
        assert started.returncode == 1  # bad failed
        assert "good: running" in started.stdout
        assert "bad: failed" in started.stdout
        assert d.ctl("stop", "nope").returncode == 6
        assert d.ctl("stop", "good", "bad").returncode == 0
        assert d.stop() == 0
    assert d.ctl("stop", "good").returncode == 7  # llamad is not running
