"""The backend registry: each kind's code in one place, and only the executables in use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import free_port, write_config

from llamad.backends import rpc
from llamad.backends.registry import BACKENDS, backend_for
from llamad.backends.tool import ServerCommand
from llamad.config.load import ConfigError, load

PACKAGE = Path(__file__).resolve().parents[2] / "llamad"


def test_every_kind_has_a_backend_that_names_itself() -> None:
    assert set(BACKENDS) == {"llama-server", "rpc-worker", "mlx"}
    for kind, backend in BACKENDS.items():
        assert backend.kind == kind
        assert backend_for(kind) is backend


def test_only_backends_compare_kind_to_a_string() -> None:
    """Outside backends/, nothing decides by `kind == "..."`: a new kind touches one package."""
    pattern = re.compile(r"""kind["')]*\s*(==|!=)\s*["']|["']\s*(==|!=)\s*\w*\.?kind\b""")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if "backends" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_rpc_workers_alone_need_no_llama_server(tmp_path: Path) -> None:
    """A machine that only lends its devices needs ggml-rpc-server, not llama-server."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"w1": {"kind": "rpc-worker", "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state"), "llama_server": str(tmp_path / "none")},
    )
    resolved = load(cfg)
    assert set(resolved.tools) == {"rpc-worker"}
    assert resolved.llama_server is None
    assert resolved.llama_server_version == ""


def test_a_missing_executable_is_reported_once_with_the_rest(
    tmp_path: Path, tiny_model: Path
) -> None:
    """The missing llama-server is one line under [daemon]; other problems still show."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "a": {"model": tiny_model, "port": free_port()},
            "b": {"model": tiny_model, "port": free_port()},
            "w": {"kind": "rpc-worker", "port": free_port(), "thread": 2},
        },
        daemon={"state_dir": str(tmp_path / "state"), "llama_server": str(tmp_path / "none")},
    )
    with pytest.raises(ConfigError) as err:
        load(cfg)
    lines = err.value.lines
    assert len(lines) == 2, lines
    assert "llama-server not found or not executable" in lines[0]
    assert "instances.w.thread: unknown key 'thread'" in lines[1]


def test_unknown_kind_suggests_the_close_one(tmp_path: Path, tiny_model: Path) -> None:
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"kind": "rpc-wroker", "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state")},
    )
    with pytest.raises(ConfigError) as err:
        load(cfg)
    assert err.value.lines[0].endswith(
        "instances.a.kind: unknown kind 'rpc-wroker' (did you mean rpc-worker?)"
    )


@pytest.mark.parametrize("spelling", ["127.0.0.1:{port}", "localhost:{port}"])
def test_a_local_worker_named_by_address_is_that_worker(
    tmp_path: Path, tiny_model: Path, spelling: str
) -> None:
    """`rpc = ["127.0.0.1:PORT"]` for a local worker forms the group, as its name does."""
    port = free_port()
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "w1": {"kind": "rpc-worker", "port": port},
            "head": {"model": tiny_model, "port": free_port(), "rpc": [spelling.format(port=port)]},
        },
        daemon={"state_dir": str(tmp_path / "state")},
    )
    head = load(cfg).instances["head"]
    assert head.workers == ("w1",)
    assert dict(head.settings)["LLAMA_ARG_RPC"] == f"127.0.0.1:{port}"


def test_rpc_help_runs_without_our_llama_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ggml-rpc-server must not see the daemon's inherited LLAMA_* while we read --help."""
    script = tmp_path / "ggml-rpc-server"
    script.write_text('#!/bin/sh\necho "usage: --host --port"\nenv | grep "^LLAMA_" || true\n')
    script.chmod(0o755)
    monkeypatch.setenv("LLAMA_ARG_MEM", "1")
    assert "LLAMA_" not in rpc.rpc_help(ServerCommand(script))
    assert "--port" in rpc.rpc_help(ServerCommand(script))
