"""50 concurrent control requests against a real daemon leave the state consistent."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from helpers import Llamad, free_port, wait_for, write_config

from llamad.client.http import Client


def servers_on(port: int) -> list[int]:
    """llama-server processes whose environment puts them on `port`."""
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "llama-server":
            continue
        try:
            if proc.environ().get("LLAMA_ARG_PORT") == str(port):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_concurrent_status_and_restarts_never_double_a_process(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Mixed status/restart storms: one process per instance, all running at the end."""
    ports = {"a": free_port(), "b": free_port()}
    cfg = write_config(
        tmp_path / "llamad.toml",
        {name: {"model": tiny_model, "port": port} for name, port in ports.items()},
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={"health_interval": 0.2, "stop_timeout": 3.0},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        for name in ports:
            d.wait_running(name)
        client = Client(d.socket)
        rng = random.Random(7)
        calls = [
            ("POST", f"/v1/instances/{rng.choice('ab')}/restart")
            if rng.random() < 0.5
            else ("GET", "/v1/status")
            for _ in range(50)
        ]
        peak: dict[int, int] = {}

        def call(method_path: tuple[str, str]) -> int:
            method, path = method_path
            status, _ = client.request(method, path)
            for port in ports.values():
                peak[port] = max(peak.get(port, 0), len(servers_on(port)))
            return status

        with ThreadPoolExecutor(max_workers=50) as pool:
            statuses = list(pool.map(call, calls))
        assert set(statuses) == {200}

        def settled() -> bool:
            doc = d.status()
            return all(i["state"] == "running" for i in doc["instances"])

        wait_for(settled, 30, "every instance running again")
        for name, port in ports.items():
            pid = d.instance(name)["pid"]
            assert servers_on(port) == [pid]
        assert all(n <= 1 for n in peak.values()), peak
        # Restarts coalesce while starting: far fewer spawns than restart requests.
        started = [e for e in d.events("instance.state_changed") if e["to"] == "starting"]
        restarts = sum(1 for m, _ in calls if m == "POST")
        assert len(started) < restarts + len(ports)
        assert d.stop() == 0
