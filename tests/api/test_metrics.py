"""GET /metrics: Prometheus text from the live state, and instances' own metrics re-exported."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers import Llamad, free_port, wait_for, write_config
from prometheus_client.parser import text_string_to_metric_families

from llamad import __version__


def text(d: Llamad) -> str:
    transport = httpx.HTTPTransport(uds=str(d.socket))
    with httpx.Client(transport=transport, base_url="http://llamad") as client:
        resp = client.get("/metrics", timeout=5)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return resp.text


def scrape(d: Llamad) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text(d))
        for s in fam.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, **labels: str
) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


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
        wait_for(lambda: value(scrape(d), "llamad_instance_up", name="a") == 1.0, 10, "a up")
        os.kill(pid, signal.SIGKILL)
        d.wait_running("a", not_pid=pid)

        def up_again() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            samples = scrape(d)
            return samples if value(samples, "llamad_instance_up", name="a") == 1.0 else None

        m = wait_for(up_again, 10, "a up again")
        assert value(m, "llamad_instance_state", name="a", state="running") == 1.0
        assert value(m, "llamad_instance_state", name="a", state="failed") == 0.0
        assert value(m, "llamad_instance_restarts_total", name="a") == 1.0
        assert value(m, "llamad_instance_last_exit_code", name="a") == 137.0
        assert (value(m, "llamad_health_probe_seconds_count", name="a") or 0) > 0
        started = value(m, "llamad_instance_start_time_seconds", name="b") or 0
        assert 0 < time.time() - started < 600
        assert value(m, "llamad_reloads_total") == 0.0
        assert value(m, "llamad_config_error") == 0.0
        build = [k for k in m if k[0] == "llamad_build_info"]
        assert build
        assert dict(build[0][1])["version"] == __version__
        reexported = [k for k in m if k[0].startswith("llamacpp:")]
        assert reexported
        assert all(dict(k[1])["name"] == "b" for k in reexported)
        assert not [k for k in m if "instance" in dict(k[1])]
        assert not [k for k in m if k[0].endswith("_created")]
        assert (value(m, "process_resident_memory_bytes") or 0) > 0
        assert d.stop() == 0


def test_reexported_metrics_keep_their_names_and_types(tmp_path: Path, tiny_model: Path) -> None:
    """llama-server's counter `llamacpp:n_tokens_max` stays itself (no `_total` added), its
    HELP and TYPE come once for all instances, and each sample only gains `name`."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            n: {"model": tiny_model, "port": free_port(), "endpoint_metrics": True}
            for n in ("a", "b")
        },
        daemon={"state_dir": str(tmp_path / "state"), "reexport_metrics": True},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("a")
        d.wait_running("b")

        def both() -> str | None:
            body = text(d)
            return body if 'llamacpp:n_tokens_max{name="b"}' in body else None

        body = wait_for(both, 10, "b's metrics")
        lines = body.splitlines()
        assert lines.count("# TYPE llamacpp:n_tokens_max counter") == 1
        assert 'llamacpp:n_tokens_max{name="a"} 0' in lines
        assert 'llamacpp:n_tokens_max{name="b"} 0' in lines
        assert "llamacpp:n_tokens_max_total" not in body
        assert d.stop() == 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_finds_nothing_to_say_about_llamads_own_series(
    tmp_path: Path, tiny_model: Path
) -> None:
    """`promtool check metrics` is clean on everything llamad itself exports."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={"health_interval": 0.2},
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("a")
        wait_for(lambda: 'llamad_health_probe_seconds_count{name="a"}' in text(d), 10, "a probe")
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=text(d), capture_output=True, text=True
        )
        assert d.stop() == 0
    assert (check.returncode, check.stdout + check.stderr) == (0, "")


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
