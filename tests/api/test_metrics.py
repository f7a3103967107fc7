"""GET /metrics: Prometheus text from the live state, and instances' own metrics re-exported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from helpers import Llamad, free_port, wait_for, write_config
from prometheus_client.parser import text_string_to_metric_families


def scrape(d: Llamad) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    transport = httpx.HTTPTransport(uds=str(d.socket))
    with httpx.Client(transport=transport, base_url="http://llamad") as client:
        resp = client.get("/metrics", timeout=5)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(resp.text)
        for s in fam.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_metrics_follow_state_restarts_and_exits(tmp_path: Path, tiny_model: Path) -> None:
    """up/state/restarts/last exit code/probe histogram/build info/reloads/config error."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "a": {"model": tiny_model, "port": free_port()},
            "b": {"model": tiny_model, "port": free_port(), "endpoint_metrics": True},
        },
        daemon={"state_dir": str(tmp_path / "state"), "reexport_metrics": True},
        supervise={"health_interval": 0.2, "health_timeout": 0.5},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        pid = d.wait_running("a")
        d.wait_running("b")
        wait_for(lambda: value(scrape(d), "llamad_instance_up", instance="a") == 1.0, 10, "a up")
        os.kill(pid, signal.SIGKILL)
        d.wait_running("a", not_pid=pid)

        def up_again() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            samples = scrape(d)
            return samples if value(samples, "llamad_instance_up", instance="a") == 1.0 else None

        m = wait_for(up_again, 10, "a up again")
        assert value(m, "llamad_instance_state", instance="a", state="running") == 1.0
        assert value(m, "llamad_instance_state", instance="a", state="failed") == 0.0
        assert value(m, "llamad_instance_restarts_total", instance="a") == 1.0
        assert value(m, "llamad_instance_last_exit_code", instance="a") == 137.0
        assert (value(m, "llamad_health_probe_seconds_count", instance="a") or 0) > 0
        assert (value(m, "llamad_instance_uptime_seconds", instance="b") or 0) > 0
        assert value(m, "llamad_reloads_total") == 0.0
        assert value(m, "llamad_config_error") == 0.0
        build = [k for k in m if k[0] == "llamad_build_info"]
        assert build
        assert dict(build[0][1])["version"] == "0.1.0"
        reexported = [k for k in m if k[0].startswith("llamacpp:")]
        assert reexported
        assert all(dict(k[1])["instance"] == "b" for k in reexported)
        assert d.stop() == 0


def _seed_iterating_hf_token_first() -> str:
    # The bug took whichever secret a set of env names yielded first: pin a hash seed under
    # which that is HF_TOKEN, so the old code fails every time rather than sometimes.
    for seed in range(64):
        first = subprocess.run(
            [sys.executable, "-c", "print(next(iter({'LLAMA_API_KEY', 'HF_TOKEN'})))"],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if first == "HF_TOKEN":
            return str(seed)
    raise AssertionError("no hash seed puts HF_TOKEN first")


def test_reexport_presents_the_api_key_not_the_hf_token(tmp_path: Path, tiny_model: Path) -> None:
    """With api_key and hf_token both set, the re-export authenticates with the API key."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "k": {
                "model": tiny_model,
                "port": free_port(),
                "endpoint_metrics": True,
                "api_key": "the-api-key",
                "hf_token": "hf_not_a_bearer",
            }
        },
        daemon={"state_dir": str(tmp_path / "state"), "reexport_metrics": True},
    )
    with Llamad(cfg, env={"PYTHONHASHSEED": _seed_iterating_hf_token_first()}) as d:
        d.wait_ready()
        d.wait_running("k")

        def reexported() -> bool:
            return any(k[0].startswith("llamacpp:") for k in scrape(d))

        wait_for(reexported, 10, "llama-server's own metrics, fetched with the API key")
        assert d.stop() == 0
