"""The real daemon through llama.cpp's one `llama` binary (`llama serve`), as today's
release and installer set it up: named by the config, alone on PATH, or by one instance."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Llamad, free_port, write_config
from llama_stand_in import stand_in_llama

from llamad.backends.catalog_cache import version_of
from llamad.backends.tool import ServerCommand

FAST = {"health_interval": 0.2, "backoff_initial": 0.1, "stop_timeout": 3.0}


def validate(cfg: Path) -> tuple[int, str]:
    """`llamactl validate --config CFG`: its exit code and output."""
    done = subprocess.run(
        [sys.executable, "-m", "llamad.cli.main", "validate", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def tables(model: Path, *names: str, **extra: Any) -> dict[str, dict[str, Any]]:
    return {n: {"model": model, "port": free_port(), "ctx_size": 256, **extra} for n in names}


def save(cfg: Path, instances: dict[str, dict[str, Any]], daemon: dict[str, Any]) -> None:
    write_config(cfg, instances, daemon, FAST)


def assert_runs(d: Llamad, command: str, version: str) -> None:
    """The status document, `llamactl status` and the events name what runs."""
    daemon = d.status()["daemon"]
    assert daemon["backends"]["llama-server"]["command"] == command
    assert daemon["llama_server_version"] == version
    table = d.ctl("status")
    line = f"llama-server: {command}, version {version.removeprefix('version: ')}"
    assert line in table.stdout.splitlines(), table.stdout


@pytest.fixture
def real_version(llama_server: Path) -> str:
    return version_of(ServerCommand(llama_server))


def test_llama_serve_named_by_the_config_starts_reloads_and_validates(
    tmp_path: Path, tiny_model: Path, llama_server: Path, real_version: str
) -> None:
    llama = stand_in_llama(tmp_path / "llama", llama_server)
    daemon = {"state_dir": str(tmp_path / "state"), "llama_server": str(llama)}
    instances = tables(tiny_model, "a", "b")
    cfg = tmp_path / "llamad.toml"
    save(cfg, instances, daemon)
    assert validate(cfg) == (0, f"{cfg}: ok\n")
    with Llamad(cfg) as d:
        a, b = d.wait_running("a"), d.wait_running("b")
        assert_runs(d, f"{llama} serve", real_version)
        instances["b"]["ctx_size"] = 512
        save(cfg, instances, daemon)
        d.wait_running("b", timeout=20, not_pid=b)
        assert d.running("a") == a
        assert d.stop() == 0
    spawned = d.events("instance.spawned")
    assert sorted(e["instance"] for e in spawned) == ["a", "b", "b"]
    assert {e["command"] for e in spawned} == {f"{llama} serve"}
    assert d.events("daemon.started")[0]["backends"] == {"llama-server": f"{llama} serve"}


def test_only_llama_on_path_is_used_as_llama_serve(
    tmp_path: Path,
    tiny_model: Path,
    llama_server: Path,
    real_version: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No llama-server on PATH, the wheel's installed: the user's own `llama` runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    llama = stand_in_llama(bin_dir / "llama", llama_server)
    monkeypatch.setenv("PATH", str(bin_dir))  # for the daemon and llamactl alike
    daemon = {"state_dir": str(tmp_path / "state")}
    instances = tables(tiny_model, "a")
    cfg = tmp_path / "llamad.toml"
    save(cfg, instances, daemon)
    assert validate(cfg) == (0, f"{cfg}: ok\n")
    with Llamad(cfg) as d:
        pid = d.wait_running("a")
        assert_runs(d, f"{llama} serve", real_version)
        instances["a"]["ctx_size"] = 512
        save(cfg, instances, daemon)
        d.wait_running("a", timeout=20, not_pid=pid)
        assert d.stop() == 0


def test_an_instance_that_names_its_own_llama_runs_it(
    tmp_path: Path, tiny_model: Path, llama_server: Path, real_version: str
) -> None:
    """`llama_server` in an instance's table: that instance alone runs `llama serve`;
    adding the key to another restarts that one onto it."""
    llama = stand_in_llama(tmp_path / "llama", llama_server)
    daemon = {"state_dir": str(tmp_path / "state"), "llama_server": str(llama_server)}
    instances = tables(tiny_model, "a", "b")
    instances["b"]["llama_server"] = str(llama)
    cfg = tmp_path / "llamad.toml"
    save(cfg, instances, daemon)
    assert validate(cfg) == (0, f"{cfg}: ok\n")
    with Llamad(cfg) as d:
        a, b = d.wait_running("a"), d.wait_running("b")
        assert_runs(d, str(llama_server), real_version)
        docs = {i["name"]: i for i in d.status()["instances"]}
        assert "command" not in docs["a"]
        assert docs["b"]["command"] == f"{llama} serve"
        assert f"b: runs {llama} serve" in d.ctl("status").stdout.splitlines()
        instances["a"]["llama_server"] = str(llama)
        save(cfg, instances, daemon)
        d.wait_running("a", timeout=20, not_pid=a)
        assert d.running("b") == b
        assert d.instance("a")["command"] == f"{llama} serve"
        assert d.stop() == 0
    commands = [(e["instance"], e["command"]) for e in d.events("instance.spawned")]
    assert commands.count(("a", str(llama_server))) == 1
    assert commands.count(("a", f"{llama} serve")) == 1
    assert commands.count(("b", f"{llama} serve")) == 1
    assert len(commands) == 3
