"""RPC workers on fleet peers: a head's `rpc = ["peer/worker"]`, for real, on loopback."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from helpers import Llamad, free_port, toml_value, wait_for, write_config
from remote_helpers import ADMIN, scratch_dir, write_token

from llamad.config.load import check, load
from llamad.fleet.remote_workers import Worker, _worker

FAST = {"health_interval": 0.2, "health_timeout": 0.5, "stop_timeout": 3.0, "backoff_initial": 0.1}


def head_config(
    base: Path, model: Path, rpc: list[str], peers: list[dict[str, Any]], port: int = 0
) -> Path:
    """A llamad with one head using `rpc`, and `[fleet] peers`."""
    head = {"model": model, "port": port or free_port(), "rpc": rpc, "n_gpu_layers": "all"}
    path = write_config(
        base / "b.toml",
        {"head": {**head, "ctx_size": 256, "n_parallel": 1}},
        daemon={"state_dir": base / "b"},
        supervise=FAST,
    )
    with path.open("a", encoding="utf-8") as out:
        out.write(f"[fleet]\npeers = {toml_value(peers)}\n")
    return path


def test_unknown_peer_is_a_config_error(tmp_path: Path, tiny_model: Path) -> None:
    """`peer/worker` must name a `[fleet]` peer; the line names the key and the value."""
    peers = [{"name": "a", "url": "http://127.0.0.1:1"}]
    problems = check(head_config(tmp_path, tiny_model, ["studio/w1"], peers))
    assert any(
        "instances.head.rpc: 'studio/w1': no [fleet] peer named 'studio'" in p for p in problems
    ), problems


def test_remote_workers_are_resolved_at_launch(tmp_path: Path, tiny_model: Path) -> None:
    """host:port stays in LLAMA_ARG_RPC; `peer/worker` pairs wait for launch time."""
    token = write_token(tmp_path / "t.token", ADMIN)
    peers = [{"name": "a", "url": "http://127.0.0.1:1", "token_file": token}]
    resolved = load(head_config(tmp_path, tiny_model, ["10.0.0.7:50052", "a/w"], peers))
    head = resolved.instances["head"]
    assert dict(head.settings)["LLAMA_ARG_RPC"] == "10.0.0.7:50052"
    assert head.remote_workers == (("a", "w"),)
    assert resolved.peers["a"].token_file == token


@pytest.mark.parametrize(
    ("host", "address"),
    [("127.0.0.1", "studio:5"), ("0.0.0.0", "studio:5"), ("10.0.0.7", "10.0.0.7:5")],
)
def test_remote_worker_address(host: str, address: str) -> None:
    """A worker bound to loopback or a wildcard is reached at the peer URL's host."""
    doc = {"kind": "rpc-worker", "state": "running", "pid": 9, "port": 5, "host": host}
    assert _worker(doc, "http://studio:7777") == Worker(address, 9)


def completion(port: int) -> int:
    return httpx.post(
        f"http://127.0.0.1:{port}/completion", json={"prompt": "Hi", "n_predict": 4}, timeout=10
    ).status_code


def test_head_uses_and_follows_a_worker_on_a_peer(tiny_model: Path) -> None:
    """B's head waits for A's worker, runs with its address, and restarts when it does."""
    with scratch_dir() as base:
        listen, w_port, head_port = free_port(), free_port(), free_port()
        remote = {
            "listen": f"127.0.0.1:{listen}",
            "token_file": write_token(base / "admin.token", ADMIN),
            "advertise": False,
        }
        a_cfg = write_config(
            base / "a.toml",
            {"w": {"kind": "rpc-worker", "port": w_port}},
            daemon={"state_dir": base / "a", "remote": remote},
            supervise=FAST,
        )
        peer = {"name": "a", "url": f"http://127.0.0.1:{listen}", "token_file": base / "b.token"}
        write_token(base / "b.token", ADMIN)
        b_cfg = head_config(base, tiny_model, ["a/w"], [peer], head_port)
        head_log = base / "b" / "logs" / "head.log"
        # B first: its head must wait for a peer that is not there yet.
        with Llamad(b_cfg) as b:
            b.wait_ready()
            wait_for(lambda: "waiting for rpc worker a/w" in head_log.read_text(), 10, "a wait")
            b.wait_event("rpc.peer_unreachable", peer="a")
            with Llamad(a_cfg) as a:
                a.wait_ready()
                w_pid = a.wait_running("w")
                head_pid = b.wait_running("head", timeout=20)
                assert completion(head_port) == 200
                env = psutil.Process(head_pid).environ()
                assert env["LLAMA_ARG_RPC"] == f"127.0.0.1:{w_port}"
                assert b.instance("head")["rpc"] == {"workers": ["a/w"], "degraded": False}

                os.kill(w_pid, signal.SIGKILL)
                a.wait_running("w", not_pid=w_pid)
                b.wait_running("head", timeout=20, not_pid=head_pid)
                wait_for(lambda: completion(head_port) == 200, 10, "head serving again")
                assert b.events("rpc.worker_exited", instance="head", worker="a/w")
                assert len(b.events("rpc.peer_unreachable")) == 1  # once per outage
                assert b.stop() == 0
                assert a.stop() == 0
