"""llamad supervising the real llama-server: start, crash, hang, stop, fail, shut down."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import httpx
import psutil
import pytest
from helpers import (
    FAKE_SERVER,
    Llamad,
    free_port,
    health,
    lines,
    stand_in_binary,
    wait_for,
    write_config,
)

FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.3,
    "unhealthy_after": 2,
    "start_timeout": 10.0,
    "stop_timeout": 2.0,
    "backoff_initial": 0.1,
    "backoff_max": 0.4,
}


def config(tmp: Path, instances: dict[str, dict[str, object]], **daemon: object) -> Path:
    return write_config(
        tmp / "llamad.toml",
        instances,
        daemon={"state_dir": str(tmp / "state"), **daemon},
        supervise=FAST,
    )


def children_on(port: int) -> list[psutil.Process]:
    """Processes (any) whose command line or env puts them on `port`."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.laddr and c.laddr.port == port and c.status == "LISTEN" for c in conns):
            found.append(proc)
    return found


def test_two_instances_start_and_serve(tmp_path: Path, tiny_model: Path) -> None:
    """Both instances become ready; settings reach llama-server (ctx_size via env)."""
    a, b = free_port(), free_port()
    cfg = config(
        tmp_path,
        {
            "a": {"model": tiny_model, "port": a, "ctx_size": 512, "n_parallel": 1},
            "b": {"model": tiny_model, "port": b, "LLAMA_ARG_CTX_SIZE": 1024, "n_parallel": 1},
        },
    )
    with Llamad(cfg) as d:
        d.wait_running("a")
        d.wait_running("b")
        assert health(a) == 200
        assert health(b) == 200
        props = httpx.get(f"http://127.0.0.1:{a}/props", timeout=5).json()
        assert props["default_generation_settings"]["n_ctx"] == 512
        done = httpx.post(
            f"http://127.0.0.1:{b}/completion", json={"prompt": "Hi", "n_predict": 4}, timeout=10
        )
        assert done.status_code == 200
        assert done.json()["content"]
        assert d.stop() == 0
    assert (tmp_path / "state" / "logs" / "a.log").exists()


def test_kill_9_restarts_only_that_instance(tmp_path: Path, tiny_model: Path) -> None:
    """kill -9 of one child: it comes back healthy with a new pid; the other keeps its pid."""
    a, b = free_port(), free_port()
    cfg = config(
        tmp_path, {"a": {"model": tiny_model, "port": a}, "b": {"model": tiny_model, "port": b}}
    )
    with Llamad(cfg) as d:
        pid_a, pid_b = d.wait_running("a"), d.wait_running("b")
        os.kill(pid_a, signal.SIGKILL)
        new_a = d.wait_running("a", not_pid=pid_a)
        assert new_a != pid_a
        assert health(a) == 200
        exited = d.wait_event("instance.exited", instance="a")[0]
        assert exited["signal"] == "SIGKILL"
        assert exited["pid"] == pid_a
        assert d.running("b") == pid_b
        assert psutil.pid_exists(pid_b)
        # The first restart after a healthy run happens at once.
        assert d.events("instance.restart_scheduled", instance="a")[0]["delay_s"] == 0
        assert d.stop() == 0


def test_hang_is_detected_and_restarted(tmp_path: Path, tiny_model: Path) -> None:
    """A SIGSTOPped child fails its probes, is SIGKILLed and restarted."""
    port = free_port()
    cfg = config(tmp_path, {"a": {"model": tiny_model, "port": port}})
    with Llamad(cfg) as d:
        pid = d.wait_running("a")
        os.kill(pid, signal.SIGSTOP)
        new = d.wait_running("a", not_pid=pid)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert health(port) == 200
        assert new != pid
        changed = d.events("instance.state_changed", instance="a", to="starting")[-1]
        assert "unhealthy" in changed["error"]
        assert d.stop() == 0


def test_sigterm_ignored_gets_sigkill_within_stop_timeout(
    tmp_path: Path, llama_server: Path, tiny_model: Path
) -> None:
    """A child that ignores SIGTERM is SIGKILLed once stop_timeout has passed."""
    port = free_port()
    cfg = config(
        tmp_path,
        {"a": {"model": tiny_model, "port": port, "env": {"FAKE_IGNORE_SIGTERM": "1"}}},
        llama_server=str(FAKE_SERVER),
    )
    with Llamad(cfg, env={"FAKE_REAL_SERVER": str(llama_server)}) as d:
        pid = d.wait_running("a")
        assert d.stop(timeout=15) == 0
        exited = d.events("instance.exited", instance="a")[-1]
        assert exited["pid"] == pid
        assert exited["signal"] == "SIGKILL"
        stopping = d.events("instance.state_changed", instance="a", to="stopping")[-1]
        stopped = d.events("instance.state_changed", instance="a", to="stopped")[-1]
        assert _seconds(stopped) - _seconds(stopping) >= FAST["stop_timeout"] - 0.1
    assert not psutil.pid_exists(pid)


def test_bad_model_backs_off_then_fails_others_untouched(tmp_path: Path, tiny_model: Path) -> None:
    """A model llama-server can't load: backoff, then failed after max_restarts."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF but not really" * 10)
    good_port = free_port()
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "bad": {"model": bad, "port": free_port()},
            "good": {"model": tiny_model, "port": good_port},
        },
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={**FAST, "max_restarts": 2},
    )
    with Llamad(cfg) as d:
        good = d.wait_running("good")
        failed = d.wait_event("instance.failed", timeout=20, instance="bad")[0]
        assert "gave up after 2 restarts" in failed["reason"]
        # Three spawns in all: the first start and two restarts.
        assert len(d.events("instance.exited", instance="bad")) == 3
        assert all(e["delay_s"] > 0 for e in d.events("instance.restart_scheduled", instance="bad"))
        assert d.running("good") == good
        assert health(good_port) == 200
        assert d.stop() == 0


def test_port_held_by_foreign_socket_is_named(tmp_path: Path, tiny_model: Path) -> None:
    """A port another process holds is reported with its pid and name, with backoff."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        cfg = config(tmp_path, {"a": {"model": tiny_model, "port": port}})
        with Llamad(cfg) as d:
            ev = d.wait_event("instance.restart_scheduled", instance="a")[0]
            assert (
                ev["reason"]
                == f"port {port} in use by pid {os.getpid()} ({psutil.Process().name()})"
            )
            assert ev["delay_s"] > 0
            assert not children_on(port) or children_on(port)[0].pid == os.getpid()
            assert d.stop() == 0


def test_sigterm_stops_every_child_and_exits_0(tmp_path: Path, tiny_model: Path) -> None:
    """SIGTERM to llamad: all children gone, exit 0."""
    ports = [free_port() for _ in range(3)]
    cfg = config(tmp_path, {f"i{n}": {"model": tiny_model, "port": p} for n, p in enumerate(ports)})
    with Llamad(cfg) as d:
        pids = [d.wait_running(f"i{n}") for n in range(3)]
        assert d.stop() == 0
    assert not any(psutil.pid_exists(p) for p in pids)
    assert all(health(p) is None for p in ports)


def test_api_key_is_in_no_log_argv_or_event(tmp_path: Path, tiny_model: Path) -> None:
    """The API key reaches llama-server (401 without it) but no log, argv or event."""
    secret = "sk-test-5f0c2a1d9e"
    key_file = tmp_path / "key"
    key_file.write_text(f"# comment\n{secret}-file\n")
    key_file.chmod(0o600)
    a, b = free_port(), free_port()
    cfg = config(
        tmp_path,
        {
            "a": {"model": tiny_model, "port": a, "api_key": secret},
            "b": {"model": tiny_model, "port": b, "api_key_file": key_file},
        },
    )
    with Llamad(cfg) as d:
        pid = d.wait_running("a")
        d.wait_running("b")
        assert httpx.get(f"http://127.0.0.1:{a}/props", timeout=5).status_code == 401
        ok = httpx.get(
            f"http://127.0.0.1:{a}/props", headers={"Authorization": f"Bearer {secret}"}, timeout=5
        )
        assert ok.status_code == 200
        assert secret not in " ".join(psutil.Process(pid).cmdline())
        os.kill(pid, signal.SIGKILL)
        d.wait_running("a", not_pid=pid)
        assert d.stop() == 0
    logs = [*lines(d.stderr_path)]
    for log_file in (tmp_path / "state" / "logs").iterdir():
        logs += lines(log_file)
    assert logs
    assert not [ln for ln in logs if secret in ln]


def test_inherited_llama_env_does_not_leak(tmp_path: Path, tiny_model: Path) -> None:
    """LLAMA_* in llamad's environment never reaches the child (it would break it)."""
    port = free_port()
    cfg = config(tmp_path, {"a": {"model": tiny_model, "port": port}})
    with Llamad(cfg, env={"LLAMA_ARG_CTX_SIZE": "abc", "LLAMA_ARG_PORT": "1"}) as d:
        pid = d.wait_running("a")
        env = psutil.Process(pid).environ()
        assert env["LLAMA_ARG_PORT"] == str(port)
        assert "LLAMA_ARG_CTX_SIZE" not in env
        assert d.stop() == 0


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_stop_signals_exit_0(tmp_path: Path, tiny_model: Path, signame: str) -> None:
    """SIGTERM and SIGINT both stop the daemon cleanly."""
    cfg = config(tmp_path, {"a": {"model": tiny_model, "port": free_port()}})
    with Llamad(cfg) as d:
        pid = d.wait_running("a")
        d.proc.send_signal(getattr(signal, signame))
        assert d.proc.wait(15) == 0
    wait_for(lambda: not psutil.pid_exists(pid), 5, "child gone")


def _seconds(event: dict[str, object]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def test_stderr_tail_is_redacted_like_the_log(
    tmp_path: Path, llama_server: Path, tiny_model: Path
) -> None:
    """A server that prints its key on the way out: not in status' last_exit.stderr_tail."""
    secret = "sk-tail-7d1e4b0a93"
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    stand_in_binary(binary, llama_server, serve='echo "key=$LLAMA_API_KEY"; exit 1')
    cfg = config(
        tmp_path,
        {"a": {"model": tiny_model, "port": free_port(), "api_key": secret}},
        llama_server=str(binary),
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        tail = wait_for(lambda: (d.instance("a").get("last_exit") or {}).get("stderr_tail"))
        assert any("key=[redacted]" in ln for ln in tail), tail
        assert not [ln for ln in tail if secret in ln]
        assert secret not in str(d.instance("a"))
        assert d.stop() == 0
