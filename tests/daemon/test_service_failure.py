"""A service task that fails (watcher, control API) never takes the instances down with it.

Both faults are injected: an exhausted inotify watch limit and a control server that
dies are host conditions no test can cause on demand.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port, short_dir, until, write_config
from structlog.testing import capture_logs

import llamad.daemon.services as services
from llamad.config.load import load
from llamad.daemon.main import EXIT_FATAL, EXIT_OK, serve
from llamad.gateway.core import Gateway
from llamad.supervise.file_watch import FileWatch

FAST = {"health_interval": 0.2, "start_timeout": 20.0, "stop_timeout": 5.0}


def config(tmp: Path, model: Path) -> Path:
    daemon = {"state_dir": str(tmp / "state"), "socket": str(short_dir() / "l.sock")}
    instances = {"a": {"model": model, "port": free_port()}}
    return write_config(tmp / "llamad.toml", instances, daemon=daemon, supervise=FAST)


def named(events: list[dict[str, Any]], name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in events if e["event"] == name and all(e.get(k) == v for k, v in match.items())
    ]


def stopped_gracefully(events: list[dict[str, Any]]) -> None:
    """The instance went through STOPPING (SIGTERM first), and no SIGKILL ended it."""
    assert named(events, "instance.state_changed", instance="a", to="stopping")
    assert named(events, "instance.state_changed", instance="a", to="stopped")
    exits = named(events, "instance.exited", instance="a")
    assert exits
    assert exits[-1]["signal"] != "SIGKILL"


async def test_a_failing_watcher_is_retried_and_the_instances_keep_running(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_watches(self: FileWatch, stop: asyncio.Event, on_wake: object) -> None:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(FileWatch, "run", no_watches)
    shutdown = asyncio.Event()
    with capture_logs() as events:
        daemon = asyncio.create_task(serve(load(config(tmp_path, tiny_model)), shutdown))
        await until(lambda: named(events, "instance.state_changed", to="running"), 20, "running")
        # Retried after 1 s: the daemon carries on with the watcher down meanwhile.
        failed = await until(lambda: named(events, "daemon.service_failed", service="reload"))
        assert failed[0]["retry_in_s"] == 1.0
        assert "inotify watch limit reached" in failed[0]["error"]
        await until(lambda: len(named(events, "daemon.service_failed")) >= 2, 10, "a retry")
        assert not named(events, "instance.exited")
        shutdown.set()
        assert await daemon == EXIT_OK
    stopped_gracefully(events)
    assert named(events, "daemon.stopped", exit_code=EXIT_OK)


async def test_a_failing_control_api_ends_the_daemon_gracefully_with_exit_1(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def dies(*args: object, **kwargs: object) -> None:
        raise RuntimeError("control server died")

    monkeypatch.setattr(services, "serve_unix", dies)
    with capture_logs() as events:
        code = await asyncio.wait_for(serve(load(config(tmp_path, tiny_model))), 40)
    assert code == EXIT_FATAL
    failed = named(events, "daemon.service_failed", service="control")
    assert failed
    assert failed[0]["retry_in_s"] is None
    stopped_gracefully(events)
    assert named(events, "daemon.stopped", exit_code=EXIT_FATAL)


async def test_a_failing_gateway_ticker_is_retried_and_shutdown_still_cleans_up(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Gateway) -> None:
        raise RuntimeError("ticker broke")

    closed: list[Gateway] = []
    close = Gateway.close

    async def recorded_close(self: Gateway) -> None:
        closed.append(self)
        await close(self)

    monkeypatch.setattr(Gateway, "run", broken)
    monkeypatch.setattr(Gateway, "close", recorded_close)
    daemon = {"state_dir": str(tmp_path / "state"), "socket": str(short_dir() / "l.sock")}
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port(), "on_demand": True}},
        daemon=daemon,
        gateway={"listen": f"127.0.0.1:{free_port()}"},
    )
    shutdown = asyncio.Event()
    with capture_logs() as events:
        task = asyncio.create_task(serve(load(cfg), shutdown))
        await until(
            lambda: len(named(events, "gateway.task_failed", service="gateway-idle")) >= 2,
            10,
            "the ticker retried",
        )
        shutdown.set()
        assert await asyncio.wait_for(task, 30) == EXIT_OK
    failed = named(events, "gateway.task_failed")
    assert "RuntimeError: ticker broke" in failed[0]["error"]
    assert len(closed) == 1  # the cleanup after the ticker ran to its end
    assert not named(events, "daemon.service_failed")
