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
from llamad.supervise.reload import Reloader

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
    async def no_watches(self: Reloader, stop: asyncio.Event) -> None:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(Reloader, "_watch", no_watches)
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
