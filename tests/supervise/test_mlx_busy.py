"""Busy is not hung: an mlx_lm.server generating one long answer, one request at a time,
keeps answering its client while the one-token probes time out behind it."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import httpx
import pytest
from helpers import Llamad, free_port, wait_for, write_config
from stand_ins import install_caffeinate

FAKE_MLX = Path(__file__).resolve().parents[1] / "fake_mlx_server.py"
GENERATE_S = 4.0


def one_at_a_time_config(tmp: Path, gateway_port: int) -> Path:
    """An mlx instance run by the fake server that generates one request at a time,
    probed deeply every 0.3 s and killed after two failed probes, behind the gateway."""
    script = tmp / "mlx_lm.server"
    run = f"runpy.run_path({str(FAKE_MLX)!r}, run_name='__main__')"
    script.write_text(f"#!{sys.executable}\nimport runpy\n{run}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 16)
    supervise = {
        "health_interval": 0.2,
        "health_timeout": 0.5,
        "unhealthy_after": 2,
        "deep_probe_interval": 0.3,
        "deep_probe_timeout": 0.3,
    }
    keys = {
        "kind": "mlx",
        "model": model,
        "port": free_port(),
        "env": {"FAKE_MLX_GENERATE_S": str(GENERATE_S)},
        "supervise": supervise,
    }
    return write_config(
        tmp / "llamad.toml",
        {"m": keys},
        daemon={"state_dir": tmp / "state", "llama_server": tmp / "none", "mlx_server": script},
        gateway={"listen": f"127.0.0.1:{gateway_port}"},
    )


@pytest.mark.timeout(90)
def test_a_long_generation_is_not_killed_by_the_probes_queued_behind_it(
    tmp_path: Path,
) -> None:
    port = free_port()
    with Llamad(one_at_a_time_config(tmp_path, port)) as d:
        pid = d.wait_running("m", timeout=30)
        d.wait_event("gateway.listening")
        answers: list[int | str] = []

        def ask() -> None:
            body = {"model": "m", "prompt": "a long story", "max_tokens": 200}
            try:
                url = f"http://127.0.0.1:{port}/v1/completions"
                answers.append(httpx.post(url, json=body, timeout=30).status_code)
            except httpx.HTTPError as exc:
                answers.append(repr(exc))

        asking = threading.Thread(target=ask)
        asking.start()
        asking.join(GENERATE_S * 5)
        assert answers == [200]
        # The probes that waited behind it timed out, yet the server was never restarted.
        assert d.running("m") == pid
        assert d.events("instance.state_changed", instance="m", to="starting")[1:] == []
        assert d.stop() == 0


@pytest.mark.timeout(90)
def test_the_mac_is_kept_awake_while_the_gateway_has_a_request(tmp_path: Path) -> None:
    """The daemon holds `caffeinate -i -w PID` (a stand-in on PATH) while a request is in
    flight, says so in status, and lets go when it stops."""
    port, record = free_port(), install_caffeinate(tmp_path / "bin")
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    with Llamad(one_at_a_time_config(tmp_path, port), env={"PATH": path}) as d:
        d.wait_running("m", timeout=30)
        d.wait_event("gateway.listening")
        assert d.status()["daemon"]["keep_awake"]["held"] is False
        assert record.read_text() == ""  # no request yet: nothing held
        body = {"model": "m", "prompt": "a long story", "max_tokens": 200}
        asking = threading.Thread(
            target=httpx.post,
            args=(f"http://127.0.0.1:{port}/v1/completions",),
            kwargs={"json": body, "timeout": 30},
        )
        asking.start()
        try:
            awake = wait_for(
                lambda: (a := d.status()["daemon"]["keep_awake"])["held"] and a, 10, "held"
            )
            started = wait_for(lambda: record.read_text().split(), 10, "caffeinate's record")
            assert started[2:] == ["-i", "-w", str(d.proc.pid)]
            assert f"caffeinate pid {awake['pid']}" in d.ctl("status").stdout
        finally:
            asking.join(GENERATE_S * 5)
        assert d.stop() == 0
    assert [line.split()[0] for line in record.read_text().splitlines()] == ["start", "stop"]
