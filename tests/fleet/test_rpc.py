"""RPC workers (ggml-rpc-server) and the llama-server heads that use them, for real."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest
from helpers import Llamad, free_port, wait_for, write_config

from llamad.config.load import check, load

FAST = {"health_interval": 0.2, "health_timeout": 0.5, "stop_timeout": 3.0, "backoff_initial": 0.1}


def group_config(tmp: Path, model: Path, worker: dict[str, object] | None = None) -> Path:
    return write_config(
        tmp / "llamad.toml",
        {
            "w1": {"kind": "rpc-worker", "port": free_port(), **(worker or {})},
            "head": {
                "model": model,
                "port": free_port(),
                "rpc": ["w1"],
                "n_gpu_layers": "all",
                "ctx_size": 256,
                "n_parallel": 1,
            },
        },
        daemon={"state_dir": str(tmp / "state")},
        supervise=FAST,
    )


def test_group_resolves_worker_names_to_addresses(tmp_path: Path, tiny_model: Path) -> None:
    """A head's `rpc = ["w1"]` becomes LLAMA_ARG_RPC=host:port and a dependency on w1."""
    resolved = load(group_config(tmp_path, tiny_model, {"threads": 2, "cache": True}))
    worker, head = resolved.instances["w1"], resolved.instances["head"]
    assert worker.kind == "rpc-worker"
    assert worker.args == (
        "--host",
        "127.0.0.1",
        "--port",
        str(worker.port),
        "--threads",
        "2",
        "--cache",
    )
    assert dict(head.settings)["LLAMA_ARG_RPC"] == f"127.0.0.1:{worker.port}"
    assert head.workers == ("w1",)
    assert "rpc-worker" in resolved.tools


@pytest.mark.parametrize(
    ("worker", "needle"),
    [
        (
            {"thread": 2},
            "instances.w1.thread: unknown key 'thread' for an rpc-worker (did you mean threads?)",
        ),
        (
            {"host": "0.0.0.0"},
            "instances.w1.host: 0.0.0.0 is beyond loopback and RPC has no authentication",
        ),
        ({"mem": 1024}, "instances.w1.mem: this ggml-rpc-server has no --mem option"),
    ],
    ids=["unknown key", "beyond loopback", "no --mem in this build"],
)
def test_worker_config_errors(
    tmp_path: Path, tiny_model: Path, worker: dict[str, object], needle: str
) -> None:
    """Worker tables are checked like any other, with RPC's own rules."""
    problems = check(group_config(tmp_path, tiny_model, worker))
    assert any(needle in p for p in problems), problems


def test_allow_remote_permits_a_wider_bind(tmp_path: Path, tiny_model: Path) -> None:
    """allow_remote = true is the explicit opt-in for binding beyond loopback."""
    assert (
        check(group_config(tmp_path, tiny_model, {"host": "0.0.0.0", "allow_remote": True})) == []
    )


def test_unknown_rpc_name_is_an_error(tmp_path: Path, tiny_model: Path) -> None:
    """A head naming a worker that does not exist is refused."""
    cfg = write_config(
        tmp_path / "c.toml",
        {"head": {"model": tiny_model, "port": free_port(), "rpc": ["nope"]}},
        daemon={"state_dir": str(tmp_path / "state")},
    )
    assert any("'nope' is neither a local rpc-worker nor host:port" in p for p in check(cfg))


def completion(port: int) -> int:
    return httpx.post(
        f"http://127.0.0.1:{port}/completion", json={"prompt": "Hi", "n_predict": 4}, timeout=10
    ).status_code


def test_worker_restart_restarts_its_head(tmp_path: Path, tiny_model: Path) -> None:
    """The head starts after its worker; kill -9 of the worker restarts both, healthy again."""
    cfg = group_config(tmp_path, tiny_model)
    head_port = load(cfg).instances["head"].port
    with Llamad(cfg) as d:
        d.wait_ready()
        worker_pid = d.wait_running("w1")
        head_pid = d.wait_running("head")
        assert completion(head_port) == 200
        head_doc = d.instance("head")
        assert head_doc["rpc"] == {"workers": ["w1"], "degraded": False}
        assert d.instance("w1")["kind"] == "rpc-worker"
        os.kill(worker_pid, signal.SIGKILL)
        d.wait_running("w1", not_pid=worker_pid)
        new_head = d.wait_running("head", not_pid=head_pid)
        assert new_head != head_pid
        wait_for(lambda: completion(head_port) == 200, 10, "head serving again")
        assert d.events("rpc.worker_exited", instance="head", worker="w1")
        assert d.stop() == 0


def test_head_waits_for_its_worker(tmp_path: Path, tiny_model: Path) -> None:
    """The head's process is not launched before its worker is ready."""
    cfg = group_config(tmp_path, tiny_model)
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("head")
        head_log = (tmp_path / "state" / "logs" / "head.log").read_text()
        assert head_log.index("waiting for rpc workers: w1") < head_log.index("started pid")
        assert d.stop() == 0


def test_table_shows_the_group_and_flags_it_when_degraded() -> None:
    """`llamactl status` prints one line per RPC head, flagged when a worker is down."""
    from llamad.cli.table import render

    head = {"name": "big", "state": "running", "rpc": {"workers": ["w1", "a/w"], "degraded": True}}
    worker = {"name": "w1", "state": "backoff", "kind": "rpc-worker", "error": "exited"}
    text = render({"daemon": {}, "instances": [head, worker]})
    assert "big: rpc group with w1, a/w (degraded: a worker is not running)" in text
    head["rpc"]["degraded"] = False  # type: ignore[index]
    assert (
        "big: rpc group with w1, a/w\n"
        in render({"daemon": {}, "instances": [head, worker]}) + "\n"
    )


def test_llama_server_upgrade_restarts_heads_once_and_not_workers(
    tmp_path: Path, tiny_model: Path, llama_server: Path
) -> None:
    """A new llama-server restarts what runs llama-server; the worker keeps its process and
    the head restarts exactly once (not again through its worker)."""
    wrapper = tmp_path / "bin" / "llama-server"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{llama_server}" "$@"\n')
    wrapper.chmod(0o755)
    cfg = group_config(tmp_path, tiny_model)
    text = cfg.read_text().replace("[daemon]\n", f'[daemon]\nllama_server = "{wrapper}"\n', 1)
    cfg.write_text(text)
    with Llamad(cfg) as d:
        d.wait_ready()
        worker_pid = d.wait_running("w1")
        head_pid = d.wait_running("head")
        new = wrapper.with_suffix(".new")
        new.write_text(f'#!/bin/sh\n# upgraded\nexec "{llama_server}" "$@"\n')
        new.chmod(0o755)
        os.replace(new, wrapper)
        d.wait_event("config.reloaded")
        d.wait_running("head", not_pid=head_pid, timeout=20)
        reloaded = d.events("config.reloaded")[-1]
        assert reloaded["rolling_restart"] == ["head"]
        assert d.running("w1") == worker_pid
        restarts = d.events("instance.state_changed", instance="head", to="starting")
        assert len(restarts) == 2  # the first start, and the upgrade's one restart
        assert d.stop() == 0
