"""llamad supervising mlx_lm.server: the real one on the CPU, a fake one for wedges."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad, free_port, wait_for, write_config

pytest.importorskip("mlx_lm", reason="the mlx extra does not install on this platform")

FAKE_MLX = Path(__file__).resolve().parents[1] / "fake_mlx_server.py"
# mlx_lm.server imports MLX before it binds: seconds on a busy 2-core machine.
START = 50.0
FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.5,
    "unhealthy_after": 2,
    "start_timeout": START,
    "stop_timeout": 3.0,
    "backoff_initial": 0.1,
    "backoff_max": 0.4,
}


def config(tmp: Path, keys: dict[str, Any], **daemon: Any) -> Path:
    return write_config(
        tmp / "llamad.toml",
        {"m": {"kind": "mlx", **keys}},
        daemon={"state_dir": str(tmp / "state"), "llama_server": str(tmp / "none"), **daemon},
        supervise=FAST,
    )


def fake_config(tmp: Path, fault: dict[str, str], supervise: dict[str, float]) -> Path:
    """One mlx instance run by the fake server (an executable script, as `[daemon]
    mlx_server` needs) with `fault` switched on, serving a model directory of zeros."""
    script = tmp / "mlx_lm.server"
    run = f"runpy.run_path({str(FAKE_MLX)!r}, run_name='__main__')"
    script.write_text(f"#!{sys.executable}\nimport runpy\n{run}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 16)
    keys = {"model": model, "port": free_port(), "env": fault, "supervise": supervise}
    return config(tmp, keys, mlx_server=script)


@pytest.mark.timeout(180)
def test_real_server_ready_streams_and_recovers_from_kill_9(
    tmp_path: Path, tiny_mlx_model: Path
) -> None:
    """Ready means a token was generated; chat streams; kill -9 brings a new healthy pid."""
    port = free_port()
    with Llamad(config(tmp_path, {"model": tiny_mlx_model, "port": port})) as d:
        pid = d.wait_running("m", timeout=START)
        # Ready was only declared after a one-token completion succeeded (the log is
        # written a moment later: output is gathered before it is written).
        log = tmp_path / "state" / "logs" / "m.log"
        wait_for(lambda: 'POST /v1/completions HTTP/1.1" 200' in log.read_text(), 10, "the log")
        status = d.status()
        assert status["daemon"]["backends"]["mlx"]["version"] not in ("", "unknown")
        inst = d.instance("m")
        assert inst["kind"] == "mlx"
        assert inst["model_bytes"] > 0
        assert inst["rss_bytes"] > 0
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        with httpx.stream("POST", url, json=body, timeout=30) as resp:
            data = [ln[6:] for ln in resp.iter_lines() if ln.startswith("data: ")]
        assert data[-1] == "[DONE]"
        assert json.loads(data[0])["object"] == "chat.completion.chunk"
        os.kill(pid, signal.SIGKILL)
        new = d.wait_running("m", timeout=START, not_pid=pid)
        assert new != pid
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        assert d.stop() == 0


def test_wedged_generation_is_caught_by_the_deep_probe(tmp_path: Path) -> None:
    """/health keeps saying 200, but one-token completions hang: killed and restarted."""
    cfg = fake_config(
        tmp_path,
        {"FAKE_MLX_WEDGE_AFTER": "1.5"},
        {"deep_probe_interval": 0.5, "deep_probe_timeout": 0.5},
    )
    with Llamad(cfg) as d:
        pid = d.wait_running("m", timeout=20)
        new = d.wait_running("m", timeout=20, not_pid=pid)
        assert new != pid
        change = d.events("instance.state_changed", instance="m", to="starting")[-1]
        assert "unhealthy: 2 failed probes (one-token completion" in change["error"]
        assert d.stop() == 0


def test_health_503_is_fatal_at_once(tmp_path: Path) -> None:
    """A dead generation thread (/health 503) is killed on the first probe that sees it."""
    cfg = fake_config(
        tmp_path, {"FAKE_MLX_DEAD_AFTER": "1"}, {"unhealthy_after": 50, "deep_probe_interval": 0}
    )
    with Llamad(cfg) as d:
        pid = d.wait_running("m", timeout=20)
        d.wait_running("m", timeout=20, not_pid=pid)
        change = d.events("instance.state_changed", instance="m", to="starting")[-1]
        assert "unhealthy: fatal probe (/health 503" in change["error"]
        assert d.stop() == 0
