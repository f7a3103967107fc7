"""The library's daemon tests share a hub and registry stand-in serving tiny models, and
a daemon whose library pulls from it (its cache and pull folder under the test's tmp)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Llamad, free_port, short_dir
from hub_stand_in import Hub, serving

from llamad.daemon.tinymodel import Shape, write_tiny_model

GGUF = "application/vnd.ollama.image.model"


@pytest.fixture(scope="module")
def bigger_model(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A model past huggingface_hub's 10 MiB read chunk: a cut after the first chunk
    leaves bytes on disk to resume from."""
    shape = Shape(n_embd=256, n_head=4, n_layer=4, n_ff=1024)
    return write_tiny_model(tmp_path_factory.mktemp("big") / "big.gguf", shape=shape).read_bytes()


@pytest.fixture
def hub(tiny_model: Path, bigger_model: bytes) -> Iterator[Hub]:
    data = tiny_model.read_bytes()
    hub = Hub()
    hub.repos["someone/Tiny-GGUF"] = {"tiny-Q4_K_M.gguf": data, "tiny-Q8_0.gguf": bigger_model}
    hub.repos["someone/Big-GGUF"] = {"big-Q4_K_M.gguf": bigger_model, "big-Q8_0.gguf": data}
    hub.repos["someone/Corrupt-GGUF"] = {"c-Q4_K_M.gguf": data}
    hub.claimed_sha["c-Q4_K_M.gguf"] = "0" * 64
    hub.repos["someone/Huge-GGUF"] = {"h-Q4_K_M.gguf": data}
    hub.claimed_size["h-Q4_K_M.gguf"] = 10**16
    hub.ollama["tinyllama:1b"] = [
        (GGUF, data),
        ("application/vnd.ollama.image.params", b'{"num_ctx": 512}'),
        ("application/vnd.ollama.image.system", b"You are a tiny llama."),
    ]
    with serving(hub):
        yield hub


@pytest.fixture
def daemon_env() -> dict[str, str]:
    """More environment for the daemon (a module overrides this fixture)."""
    return {}


@pytest.fixture
def gateway_extra() -> str:
    """More `[gateway]` lines for the daemon's config (a module overrides this fixture)."""
    return ""


@pytest.fixture
def daemon(
    tmp_path: Path, hub: Hub, daemon_env: dict[str, str], gateway_extra: str
) -> Iterator[tuple[Llamad, str, Path]]:
    d = short_dir()
    port = free_port()
    cfg = d / "llamad.toml"
    models = tmp_path / "home" / "models"
    cfg.write_text(
        f'[daemon]\nstate_dir = "{d}/state"\n[supervise]\nhealth_interval = 0.5\n'
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n{gateway_extra}\n'
        f'[library]\ndirs = ["{models}", "{tmp_path}/hub"]\npull_dir = "{models}"\n'
        f'ollama_registry = "{hub.url}"\n[library.defaults]\nctx_size = 256\n'
    )
    env = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_XET": "1"}
    with Llamad(cfg, {**env, **daemon_env}) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        yield ld, f"http://127.0.0.1:{port}", tmp_path / "hub"
        assert ld.stop() == 0
