"""kind = "mlx": options from the installed mlx_lm.server, model resolution, clear errors."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port, write_config

from llamad.backends.mlx.cache_limit import machine_default
from llamad.backends.mlx.model import pin_model, resolve_model
from llamad.backends.mlx.options import parse_help
from llamad.backends.mlx.tool import find_server, load_options, package_version
from llamad.backends.registry import backend_for
from llamad.config.load import ConfigError, Resolved, load

pytest.importorskip("mlx_lm", reason="the mlx extra does not install on this platform")


def mlx_config(tmp: Path, model: object, **keys: Any) -> Path:
    """A config with one mlx instance and a llama-server that does not exist."""
    return write_config(
        tmp / "llamad.toml",
        {"m": {"kind": "mlx", "model": model, "port": free_port(), **keys}},
        daemon={"state_dir": str(tmp / "state"), "llama_server": str(tmp / "no-llama")},
    )


def problems(cfg: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(cfg)
    return err.value.lines


def test_only_mlx_needs_no_llama_server(tmp_path: Path, tiny_mlx_model: Path) -> None:
    """A Mac with only MLX models needs no llama-server; the version is mlx-lm's."""
    resolved: Resolved = load(mlx_config(tmp_path, tiny_mlx_model, max_tokens=64))
    assert set(resolved.tools) == {"mlx"}
    assert resolved.tools["mlx"].version == importlib.metadata.version("mlx-lm")
    spec = resolved.instances["m"]
    assert spec.model == tiny_mlx_model
    assert dict(spec.settings)["HF_HUB_OFFLINE"] == "1"
    argv, env = backend_for("mlx").command(spec, resolved.tools["mlx"], {})
    assert argv[1:] == [
        *("--model", str(tiny_mlx_model), "--host", "127.0.0.1", "--port", str(spec.port)),
        *("--max-tokens", "64"),
        *("--prompt-cache-bytes", str(machine_default())),  # llamad's limit (test_mlx_memory)
    ]
    assert Path(env["HF_HUB_CACHE"]).is_dir()
    # mlx_lm.server's prompt cache lives and dies with its process: status says so.
    assert spec.prompt_cache is None
    assert spec.cache_note == "mlx_lm.server keeps no prompt cache across processes"


def test_options_come_from_the_installed_help(tmp_path: Path) -> None:
    """Short keys for every flag the installed server lists; llamad's own are reserved."""
    options = load_options(find_server(None), tmp_path)
    for key in ("max_tokens", "temp", "top_p", "top_k", "draft_model", "num_draft_tokens"):
        assert options.lookup(key) is not None
    for key in ("adapter_path", "chat_template_args", "decode_concurrency", "kv_bits"):
        assert options.lookup(key) is not None
    for key in ("model", "host", "port", "help"):
        assert options.lookup(key) is None
    level = options.lookup("log_level")
    assert level is not None
    assert level.value is not None
    assert "DEBUG" in level.value
    # The second read is the cache's: same options, no --help run needed.
    assert list(tmp_path.glob("mlx-options-*.json"))
    assert load_options(find_server(None), tmp_path) == options


def test_bad_keys_and_args_are_one_line_each_with_hints(
    tmp_path: Path, tiny_mlx_model: Path
) -> None:
    cfg = mlx_config(
        tmp_path,
        tiny_mlx_model,
        max_token=10,
        log_level="LOUD",
        trust_remote_code="yes",
        api_key="secret",
        args=["--port", "9", "--nope"],
    )
    lines = problems(cfg)
    text = "\n".join(lines)
    assert len(lines) == 6, text
    assert all(line.startswith(f"{cfg}:") for line in lines)
    assert "instances.m.max_token: unknown key 'max_token' (did you mean max_tokens?)" in text
    assert "instances.m.log_level: must be one of DEBUG," in text
    assert "instances.m.trust_remote_code: must be true or false (got 'yes')" in text
    assert "instances.m.api_key: mlx_lm.server has no API key" in text
    assert "--port is set with the `model`/`host`/`port` keys" in text
    assert "unknown mlx_lm.server flag '--nope'" in text


def test_beyond_loopback_needs_allow_remote(tmp_path: Path, tiny_mlx_model: Path) -> None:
    """No API key: like an RPC worker, it binds beyond loopback only when told to."""
    (line,) = problems(mlx_config(tmp_path, tiny_mlx_model, host="0.0.0.0"))
    assert "instances.m.host: 0.0.0.0 is beyond loopback and mlx_lm.server has no API key" in line
    spec = load(mlx_config(tmp_path, tiny_mlx_model, host="0.0.0.0", allow_remote=True))
    assert spec.instances["m"].host == "0.0.0.0"


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    lines = problems(mlx_config(tmp_path, tmp_path / "nowhere"))
    assert lines == [lines[0]]
    assert lines[0].endswith(
        f"instances.m.model: MLX model directory not found: {tmp_path}/nowhere"
    )


def test_a_relative_model_is_taken_from_the_config_files_directory(
    tmp_path: Path, tiny_mlx_model: Path
) -> None:
    shutil.copytree(tiny_mlx_model, tmp_path / "models" / "tiny")
    spec = load(mlx_config(tmp_path, "models/tiny")).instances["m"]
    assert spec.model == tmp_path / "models" / "tiny"


def test_a_directory_without_weights_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    (line,) = problems(mlx_config(tmp_path, tmp_path / "half"))
    assert "has no *.safetensors weights" in line


def test_repo_id_must_be_in_the_local_cache(
    tmp_path: Path, tiny_mlx_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repo id resolves from the hub cache only; nothing is downloaded."""
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    (line,) = problems(mlx_config(tmp_path, "mlx-community/Tiny-4bit"))
    assert "mlx-community/Tiny-4bit is not in the Hugging Face cache" in line
    assert "hf download mlx-community/Tiny-4bit" in line
    root = cache / "models--mlx-community--Tiny-4bit"
    shutil.copytree(tiny_mlx_model, root / "snapshots" / "abc123")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("abc123")
    model = resolve_model("mlx-community/Tiny-4bit", cache, tmp_path)
    assert model.directory == root / "snapshots" / "abc123"
    assert sum(p.stat().st_size for p in model.weight_files()) > 0
    spec = load(mlx_config(tmp_path, "mlx-community/Tiny-4bit")).instances["m"]
    assert spec.model == model.directory
    assert dict(spec.settings)["HF_HUB_CACHE"] == str(cache)


def test_version_is_read_from_the_scripts_interpreter(tmp_path: Path) -> None:
    """The mlx-lm version comes from the Python named on the `#!` line, without MLX."""
    script = tmp_path / "mlx_lm.server"
    script.write_text(f"#!/usr/bin/env {sys.executable}\n")
    assert package_version(script) == importlib.metadata.version("mlx-lm")
    script.write_text("echo not python\n")
    assert package_version(script) == "unknown"


def test_a_proxied_body_cannot_switch_the_model() -> None:
    """The gateway pins `model` (a client's would make the server load another one)."""
    body = json.dumps({"model": "org/Other", "draft_model": "x", "adapters": "y", "n": 1})
    assert json.loads(pin_model(body.encode())) == {"model": "default_model", "n": 1}
    assert pin_model(b"not json") == b"not json"
    assert pin_model(b"[1]") == b"[1]"


def test_parse_help_reads_argparse_rows() -> None:
    text = """options:
  -h, --help            show this help message and exit
  --model MODEL         The path
  --log-level {DEBUG,INFO}
                        Set the logging level
  --pipeline            Use pipelining
"""
    rows = {o.flags[-1]: o.value for o in parse_help(text)}
    assert rows == {
        "--help": None,
        "--model": "MODEL",
        "--log-level": "{DEBUG,INFO}",
        "--pipeline": None,
    }
