"""`[library]` in the config: library models become on-demand instances beside the
configured ones, which always win; one bad model never makes the config invalid."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import free_port
from library_helpers import ollama_store, write_projector

from llamad.config.load import ConfigError, load
from llamad.daemon.tinymodel import write_tiny_model

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "llamad.toml"
    path.write_text(f'[gateway]\nlisten = "127.0.0.1:{free_port()}"\n' + body)
    return path


@pytest.fixture
def models(tmp_path: Path, tiny_model: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copyfile(tiny_model, folder / "alpha-Q8_0.gguf")
    shutil.copyfile(tiny_model, folder / "taken.gguf")
    (folder / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    params = {"num_ctx": 2048, "typical_p": 0.9, "num_keep": 4}
    ollama_store(folder / "ollama", "tinyllama", "1b", tiny_model, params=params)
    return folder


def test_library_models_are_on_demand_instances_and_configured_ones_win(
    tmp_path: Path, models: Path, tiny_model: Path
) -> None:
    body = f"""
[library]
dirs = ["{models}", "{models}/ollama"]
ports = "21000-21099"
[library.defaults]
n_gpu_layers = 0
[instances.taken]
model = "{tiny_model}"
port = {free_port()}
[instances.mine]
model = "tinyllama:1b"
port = {free_port()}
on_demand = true
"""
    r = load(_config(tmp_path, body))
    assert r.library is not None
    alpha = r.instances["alpha-Q8_0"]
    env = dict(alpha.settings)
    assert alpha.on_demand
    assert not alpha.autostart
    assert 21000 <= alpha.port <= 21099
    assert env["LLAMA_ARG_MODEL"] == str(models / "alpha-Q8_0.gguf")
    assert env["LLAMA_ARG_CTX_SIZE"] == "4096"  # Ollama's and LM Studio's default context
    assert env["LLAMA_ARG_N_GPU_LAYERS"] == "0"
    assert alpha.idle_timeout == 300.0
    # A configured instance names a library model: its blob, and its name as an alias.
    mine = r.instances["mine"]
    assert mine.model is not None
    assert mine.model.name.startswith("sha256-")
    assert "tinyllama:1b" in mine.aliases
    assert "tinyllama:1b" not in r.instances
    assert r.library.served["tinyllama:1b"] == "mine"
    # The clash with [instances.taken] is skipped, with a note.
    assert r.instances["taken"].model == tiny_model
    assert any("'taken' is taken by instances.taken" in n for n in r.library.notes)
    # The corrupt file is listed with the reason, never an instance.
    broken = r.library.find("broken")
    assert broken is not None
    assert "not a loadable GGUF" in (broken.problem or "")
    assert "broken" not in r.instances
    # A reload keeps each model's port.
    again = load(r.path, r)
    assert again.instances["alpha-Q8_0"] == alpha


def test_ollama_params_become_settings(tmp_path: Path, models: Path) -> None:
    r = load(_config(tmp_path, f'[library]\ndirs = ["{models}/ollama"]\n'))
    spec = r.instances["tinyllama:1b"]
    assert dict(spec.settings)["LLAMA_ARG_CTX_SIZE"] == "2048"
    # Options llama-server has only as flags (no env name) go on the command line.
    assert spec.args[:4] == ("--typical", "0.9", "--keep", "4")
    assert spec.args[4:] == ("--slot-save-path", str(spec.prompt_cache))  # the prompt cache


def test_bad_library_keys_are_config_errors(tmp_path: Path, models: Path) -> None:
    body = f"""
[library]
dirs = ["{models}"]
ports = "80-90"
[library.defaults]
ctx_sise = 4096
port = 9
"""
    with pytest.raises(ConfigError) as err:
        load(_config(tmp_path, body))
    text = "\n".join(err.value.lines)
    assert "library.ports: must lie within 1024-65535" in text
    assert "library.defaults.ctx_sise: unknown key 'ctx_sise' (did you mean ctx_size?)" in text
    assert "library.defaults.port: is set for each library model by llamad" in text


def test_no_library_without_a_gateway_unless_asked(tmp_path: Path, models: Path) -> None:
    path = tmp_path / "llamad.toml"
    path.write_text(f'[instances.a]\nmodel = "{models}/alpha-Q8_0.gguf"\nport = {free_port()}\n')
    assert load(path).library is None
    path.write_text(f'[library]\ndirs = ["{models}"]\n')
    assert "alpha-Q8_0" in load(path).instances
    path.write_text(f'[library]\nenabled = false\ndirs = ["{models}"]\n')
    assert load(path).library is None


def test_a_split_model_runs_from_its_first_part_and_a_projector_attaches(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "models"
    first = write_tiny_model(folder / "big-Q8_0.gguf", split=8)
    vision = folder / "vision"
    write_tiny_model(vision / "seer-Q4_0.gguf")
    write_projector(vision / "mmproj-seer-f16.gguf")
    r = load(_config(tmp_path, f'[library]\ndirs = ["{folder}"]\n'))
    assert set(r.instances) == {"big-Q8_0", "seer-Q4_0"}  # parts and projector: no models
    big = dict(r.instances["big-Q8_0"].settings)
    assert big["LLAMA_ARG_MODEL"] == str(first)  # llama-server finds the other parts
    assert "LLAMA_ARG_MMPROJ" not in big
    seer = dict(r.instances["seer-Q4_0"].settings)
    assert seer["LLAMA_ARG_MMPROJ"] == str(vision / "mmproj-seer-f16.gguf")
